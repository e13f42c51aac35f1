! caf_syncall.f90 -- SYNC ALL and SYNC IMAGES latency on all images.
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
! Then the same for SYNC IMAGES with each image's ring neighbours (left and
! right; the one other image on 2, none on 1), a halo exchange's
! synchronization: a checked warm-up (put k to the right, SYNC IMAGES,
! check the left's k, SYNC IMAGES), then timed statements and loops.
!
! Output (image 1, stdout): "# key=value" lines, the column header
!   op,images,iters,median_us,loop_us
! and two rows, e.g. caf_syncall,4,2000,12.345,11.987 and
! caf_syncimages,4,2000,6.789,6.543.  Exit status 0 only if every check
! passed.
program caf_syncall
  use, intrinsic :: iso_fortran_env, only: int64, real64
  implicit none
  integer(int64) :: tick[*]          ! written by the left neighbour
  real(real64), allocatable :: lat(:), loop(:)
  integer, allocatable :: nbr(:)     ! SYNC IMAGES' partners
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

  ! ---- SYNC IMAGES with the ring neighbours ----
  if (np == 1) then
    allocate (nbr(0))
  else if (np == 2) then
    nbr = [right]
  else
    nbr = [left, right]
  end if
  sync all
  tick = 0
  sync all
  do k = 1, warm
    if (np > 1) tick[right] = int(k, int64)
    sync images(nbr)
    if (np > 1 .and. tick /= int(k, int64)) then
      if (nfail == 0) write (*, '(a,i0,a,i0,a,i0,a,i0)') '# FAIL image ', me, &
        ': sync images step ', k, ' saw ', tick, ' from image ', left
      nfail = nfail + 1
    end if
    sync images(nbr)                 ! the right one checked k before k+1 comes
  end do
  do k = 1, iters
    lat(k) = now_us()
    sync images(nbr)
    lat(k) = now_us() - lat(k)
  end do
  do r = 1, reps
    loop(r) = now_us()
    do k = 1, iters
      sync images(nbr)
    end do
    loop(r) = (now_us() - loop(r)) / iters
  end do
  if (me == 1) then
    write (*, '(a,i0,a,i0,a)') 'caf_syncimages,', np, ',', iters, ','//fmt(median(lat), 3)// &
      ','//fmt(median(loop), 3)
    flush (6)
  end if

  call end_checks('caf_syncall', nfail)

contains

  include 'bench_util.inc'

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
        case ('--reps'); reps = int(to_int(val))
        case ('--iters'); iters = int(to_int(val))
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
