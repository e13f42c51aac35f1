! caf_syncall.f90 -- SYNC ALL latency on all images.
!
!   cafrun -n P ./caf_syncall [--quick] [--reps R] [--iters N]
!
! Every image runs the same statements.  First a checked warm-up: in step
! k each image puts k into its right neighbour's coarray, SYNC ALL, then
! checks that its left neighbour's k arrived (what SYNC ALL promises: a
! put before it is visible after it on every image), SYNC ALL again.
! Then `iters` SYNC ALL statements (--iters, default 2000, 500 with
! --quick), each timed on its own (system_clock, int64 count, ns on
! gfortran): image 1 reports the median of its times.  Then --reps loops
! of `iters` SYNC ALL back to back: image 1 reports the median over the
! loops of (loop time / iters).  In a loop of back-to-back barriers every
! image's time per statement is the barrier's period, so image 1's view is
! the barrier's latency (the definition of bench/bench_barrier.c and
! bench/peers/mpi_barrier.c too).
!
! Output (image 1, stdout): "# key=value" lines, the column header
!   op,images,iters,median_us,loop_us
! and one row, e.g. caf_syncall,4,2000,12.345,11.987.  Exit status 0 only
! if every check passed.
program caf_syncall
  use, intrinsic :: iso_fortran_env, only: int64, real64
  implicit none
  integer(int64) :: tick[*]          ! written by the left neighbour
  integer :: bad[*]                  ! each image's failed checks, read by image 1
  real(real64), allocatable :: lat(:), loop(:)
  integer :: reps, iters, warm, k, r, me, np, right, left, nfail
  logical :: quick

  quick = .false.
  reps = 5; iters = 0
  call parse_args()
  if (iters == 0) then
    iters = merge(500, 2000, quick)
  end if
  warm = max(20, iters / 10)

  me = this_image()
  np = num_images()
  right = merge(1, me + 1, me == np)
  left = merge(np, me - 1, me == 1)
  allocate (lat(iters), loop(reps))
  nfail = 0
  tick = 0

  if (me == 1) then
    write (*, '(a,i0)') '# bench=caf_syncall images=', np
    write (*, '(a,i0,a,l1,a,i0)') '# reps=', reps, ' quick=', quick, ' iters=', iters
    write (*, '(a)') '# timer=system_clock_int64'
    write (*, '(a)') 'op,images,iters,median_us,loop_us'
  end if

  ! ---- checked warm-up ----
  sync all
  do k = 1, warm
    tick[right] = int(k, int64)
    sync all
    if (tick /= int(k, int64)) then
      if (nfail == 0) write (*, '(a,i0,a,i0,a,i0,a,i0)') '# FAIL image ', me, ': step ', k, &
        ' saw ', tick, ' from image ', left
      nfail = nfail + 1
    end if
    sync all                         ! nobody writes step k+1 before all checked k
  end do

  ! ---- each statement timed ----
  do k = 1, iters
    lat(k) = now_us()
    sync all
    lat(k) = now_us() - lat(k)
  end do

  ! ---- loops ----
  do r = 1, reps
    loop(r) = now_us()
    do k = 1, iters
      sync all
    end do
    loop(r) = (now_us() - loop(r)) / iters
  end do

  if (me == 1) then
    write (*, '(a,i0,a,i0,a)') 'caf_syncall,', np, ',', iters, ','//fmt(median(lat), 3)//','// &
      fmt(median(loop), 3)
    flush (6)
  end if

  bad = nfail
  sync all
  if (me == 1) then
    do k = 2, np
      nfail = nfail + bad[k]
    end do
  end if
  sync all
  if (me == 1 .and. nfail /= 0) then
    write (*, '(a,i0,a)') '# caf_syncall: ', nfail, ' check(s) FAILED'
    error stop 1
  end if
  if (me == 1) write (*, '(a)') '# caf_syncall: all checks passed'

contains

  function now_us() result(t)
    real(real64) :: t
    integer(int64) :: c, rate
    call system_clock(c, rate)
    t = real(c, real64) * (1.0e6_real64 / real(rate, real64))
  end function now_us

  function median(v) result(m)
    real(real64), intent(in) :: v(:)
    real(real64) :: m
    real(real64) :: s(size(v)), t
    integer :: a, b
    s = v
    do a = 2, size(s)              ! insertion sort: a few thousand values
      t = s(a)
      b = a - 1
      do while (b >= 1)
        if (s(b) <= t) exit
        s(b + 1) = s(b)
        b = b - 1
      end do
      s(b + 1) = t
    end do
    if (mod(size(s), 2) == 1) then
      m = s(size(s) / 2 + 1)
    else
      m = 0.5_real64 * (s(size(s) / 2) + s(size(s) / 2 + 1))
    end if
  end function median

  function fmt(v, d) result(str)
    real(real64), intent(in) :: v
    integer, intent(in) :: d
    character(len=:), allocatable :: str
    character(len=40) :: buf
    character(len=12) :: f
    write (f, '(a,i0,a)') '(f0.', d, ')'
    write (buf, f) v
    str = trim(adjustl(buf))
    if (str(1:1) == '.') str = '0'//str
  end function fmt

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
        reps = 3
      case ('--reps', '--iters')
        if (ia == na) call usage('missing value for '//trim(arg))
        call get_command_argument(ia + 1, val)
        select case (trim(arg))
        case ('--reps'); reps = to_int(val)
        case ('--iters'); iters = to_int(val)
        end select
        ia = ia + 1
      case ('-h', '--help')
        call usage('')
      case default
        call usage('unknown argument '//trim(arg))
      end select
      ia = ia + 1
    end do
    if (reps < 1 .or. iters < 0) call usage('bad value')
  end subroutine parse_args

  function to_int(s) result(v)
    character(len=*), intent(in) :: s
    integer :: v
    integer :: ios
    read (s, *, iostat=ios) v
    if (ios /= 0) call usage('not a number: '//trim(s))
  end function to_int

  subroutine usage(msg)
    character(len=*), intent(in) :: msg
    if (this_image() == 1) then
      if (len(msg) > 0) write (*, '(a)') 'caf_syncall: '//msg
      write (*, '(a)') 'usage: caf_syncall [--quick] [--reps R] [--iters N]'
    end if
    if (len(msg) > 0) error stop 2
    stop
  end subroutine usage

end program caf_syncall
