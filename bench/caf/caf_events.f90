! caf_events.f90 -- event ping-pong and remote atomics, image 1 <-> image 2.
!
!   cafrun -n 2 ./caf_events [--quick] [--iters N]
!
! event: image 1 posts ev[2] and waits on its own ev; image 2 waits on its
!   ev and posts ev[1].  One round trip per timed iteration.
! atomic_add: image 1 runs call atomic_add(cnt[2], 1), each timed on its
!   own (the statement returns once the add is done: image 2 checks the
!   total).
! elem_put, elem_get: image 1 runs xe(j)[2] = ye(j) and then ye(j) = xe(j)[2]
!   for j = 1..64, one coindexed scalar per statement (a loop written element
!   by element); the time of the 64 divided by 64, per element.  Image 2
!   checks what arrived, image 1 what came back.
! atomic_fetch_add: image 1 runs call atomic_fetch_add(cnt[2], 1, old) and
!   checks that old counts up by one each time.  A runtime that returns a
!   wrong old value gets a "# WRONG" line instead of the row (OpenCoarrays
!   2.10.1 does, on tcp and on vader): the time of a wrong answer is no
!   result, and the other rows still stand.
! Each time is the median over `iters` (default 2000, 500 with --quick)
! individually timed statements after a warmup (system_clock, int64).
!
! Output (image 1, stdout): "# key=value" lines, the column header
!   op,images,iters,median_us
! and one row per operation, e.g. caf_event,2,2000,21.345 (caf_elem_put,
! caf_elem_get: us per element)
! Exit status 0 only if every other check passed.
program caf_events
  use, intrinsic :: iso_fortran_env, only: int64, real64, event_type, atomic_int_kind
  implicit none
  type(event_type) :: ev[*]
  integer(atomic_int_kind) :: cnt[*]
  integer(atomic_int_kind) :: old, val
  integer, parameter :: NELEM = 64
  real(real64) :: xe(NELEM)[*], ye(NELEM)
  integer :: j
  real(real64), allocatable :: lat(:)
  integer :: iters, warm, k, me, nfail, nwrong
  logical :: quick

  quick = .false.
  iters = 0
  call parse_args()
  if (iters == 0) iters = merge(500, 2000, quick)
  warm = max(2, iters / 10)
  allocate (lat(iters))
  me = this_image()
  if (num_images() < 2) then
    if (me == 1) write (*, '(a)') 'caf_events: needs at least 2 images'
    error stop 2
  end if
  nfail = 0
  nwrong = 0
  cnt = 0

  if (me == 1) then
    write (*, '(a,i0)') '# bench=caf_events images=', num_images()
    write (*, '(a,i0,a,l1)') '# iters=', iters, ' quick=', quick
    write (*, '(a)') '# timer=system_clock_int64'
    write (*, '(a)') 'op,images,iters,median_us'
  end if
  sync all

  ! ---- event ping-pong ----
  if (me == 1) then
    do k = 1, warm
      event post (ev[2])
      event wait (ev)
    end do
    do k = 1, iters
      lat(k) = now_us()
      event post (ev[2])
      event wait (ev)
      lat(k) = now_us() - lat(k)
    end do
    call emit('caf_event', iters, median(lat))
  else if (me == 2) then
    do k = 1, warm + iters
      event wait (ev)
      event post (ev[1])
    end do
  end if
  sync all

  ! ---- atomic_add ----
  if (me == 1) then
    do k = 1, warm
      call atomic_add(cnt[2], 1)
    end do
    do k = 1, iters
      lat(k) = now_us()
      call atomic_add(cnt[2], 1)
      lat(k) = now_us() - lat(k)
    end do
    call emit('caf_atomic_add', iters, median(lat))
  end if
  sync all
  if (me == 2) then
    call atomic_ref(val, cnt)
    if (val /= warm + iters) then
      nfail = nfail + 1
      write (*, '(a,i0,a,i0)') '# FAIL atomic_add: count ', val, ', expected ', warm + iters
    end if
  end if
  sync all

  ! ---- element by element: xe(j)[2] = ye(j), then ye(j) = xe(j)[2] ----
  xe = 0
  sync all
  if (me == 1) then
    do k = 1, warm
      do j = 1, NELEM
        xe(j)[2] = real(j, real64)
      end do
    end do
    do k = 1, iters
      ye = real(k, real64)
      lat(k) = now_us()
      do j = 1, NELEM
        xe(j)[2] = ye(j) + j
      end do
      lat(k) = (now_us() - lat(k)) / NELEM
    end do
    call emit('caf_elem_put', iters, median(lat))
    do k = 1, iters
      lat(k) = now_us()
      do j = 1, NELEM
        ye(j) = xe(j)[2]
      end do
      lat(k) = (now_us() - lat(k)) / NELEM
    end do
    do j = 1, NELEM
      if (ye(j) /= real(iters + j, real64)) then
        nfail = nfail + 1
        write (*, '(a,i0,a,f0.1,a,i0)') '# FAIL elem_get: element ', j, ' came back ', ye(j), &
          ', expected ', iters + j
        exit
      end if
    end do
    call emit('caf_elem_get', iters, median(lat))
  end if
  sync all
  if (me == 2) then
    do j = 1, NELEM
      if (xe(j) /= real(iters + j, real64)) then
        nfail = nfail + 1
        write (*, '(a,i0,a,f0.1,a,i0)') '# FAIL elem_put: element ', j, ' is ', xe(j), &
          ', expected ', iters + j
        exit
      end if
    end do
  end if
  sync all

  ! ---- atomic_fetch_add ----
  if (me == 1) then
    do k = 1, warm
      call atomic_fetch_add(cnt[2], 1, old)
    end do
    do k = 1, iters
      lat(k) = now_us()
      call atomic_fetch_add(cnt[2], 1, old)
      lat(k) = now_us() - lat(k)
      if (old /= 2 * warm + iters + k - 1 .and. nwrong == 0) then
        nwrong = k
        write (*, '(a,i0,a,i0,a,i0)') '# WRONG atomic_fetch_add: old value ', old, &
          ' at ', k, ', expected ', 2 * warm + iters + k - 1
      end if
    end do
    if (nwrong == 0) call emit('caf_atomic_fetch_add', iters, median(lat))
  end if

  call end_checks('caf_events', nfail)

contains

  include 'bench_util.inc'

  subroutine emit(op, iters, us)
    character(len=*), intent(in) :: op
    integer, intent(in) :: iters
    real(real64), intent(in) :: us
    character(len=24) :: a, b
    write (a, '(i0)') num_images()
    write (b, '(i0)') iters
    write (*, '(a)') op//','//trim(a)//','//trim(b)//','//fmt(us, 3)
    flush (6)
  end subroutine emit

  subroutine parse_args()
    integer :: ia, na
    character(len=256) :: arg, val
    na = command_argument_count()
    ia = 1
    do while (ia <= na)
      call get_command_argument(ia, arg)
      select case (trim(arg))
      case ('--quick')
        quick = .true.
      case ('--iters')
        if (ia == na) call usage('missing value for '//trim(arg))
        call get_command_argument(ia + 1, val)
        iters = int(to_int(val))
        if (iters < 1) call usage('--iters must be >= 1')
        ia = ia + 1
      case ('-h', '--help')
        call usage('')
      case default
        call usage('unknown argument '//trim(arg))
      end select
      ia = ia + 1
    end do
  end subroutine parse_args

  subroutine usage(msg)
    character(len=*), intent(in) :: msg
    call usage_exit('caf_events', msg, '[--quick] [--iters N]')
  end subroutine usage
end program caf_events
