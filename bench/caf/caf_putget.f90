! caf_putget.f90 -- coarray put and get latency and bandwidth, image 1 -> image 2.
!
!   cafrun -n 2 ./caf_putget [--quick] [--min BYTES] [--max BYTES] [--step 2|4]
!                            [--reps R] [--iters N]
!
! For each size n (bytes, --min 8 .. --max 4 MiB, times --step: 2, or 4 with
! --quick) image 1 runs
!   get: y(1:n) = x(1:n)[2]         put: x(1:n)[2] = y(1:n)
! Latency: each statement timed on its own (system_clock, int64 count, ns on
! gfortran), median over `iters` timed statements after a warmup.
! Bandwidth: the same statement `iters` times in a loop, bytes/time, median
! over --reps loops.  Both directions are validated (a size-dependent byte
! pattern checked after each size).  Image 2 only synchronizes.
!
! Output (image 1, stdout): "# key=value" lines, the column header
!   op,bytes,iters,median_us,MB_s
! and one row per op and size, e.g. caf_put,8,1000,12.345,0.65
! (MB = 1e6 bytes).  Exit status 0 only if every check passed.
program caf_putget
  use, intrinsic :: iso_fortran_env, only: int8, int64, real64
  implicit none
  integer(int8), allocatable :: x(:)[:]
  integer(int8), allocatable :: y(:)
  real(real64), allocatable :: lat(:), bw(:)
  integer(int64) :: minb, maxb, n, budget, i
  integer :: reps, step, iters_opt, iters, warm, r, k, me, nfail
  logical :: quick

  quick = .false.
  minb = 8; maxb = 4194304; step = 2; reps = 5; iters_opt = 0
  call parse_args()
  if (quick) then
    budget = 2097152_int64
  else
    budget = 33554432_int64
  end if

  me = this_image()
  if (num_images() < 2) then
    if (me == 1) write (*, '(a)') 'caf_putget: needs at least 2 images'
    error stop 2
  end if
  allocate (x(maxb)[*])
  allocate (y(maxb))
  x = 0_int8
  y = 0_int8
  allocate (bw(reps))
  nfail = 0

  if (me == 1) then
    write (*, '(a,i0)') '# bench=caf_putget images=', num_images()
    write (*, '(a,i0,a,l1,a,i0)') '# reps=', reps, ' quick=', quick, ' step=', step
    write (*, '(a)') '# timer=system_clock_int64'
    write (*, '(a)') 'op,bytes,iters,median_us,MB_s'
  end if

  n = minb
  do while (n <= maxb)
    if (iters_opt > 0) then
      iters = iters_opt
    else
      iters = int(max(10_int64, min(1000_int64, budget / n)))
    end if
    warm = max(2, iters / 10)
    if (allocated(lat)) deallocate (lat)
    allocate (lat(iters))

    ! image 2 publishes the get pattern before the sync
    if (me == 2) then
      do i = 1, n
        x(i) = pattern(i, n, 1)
      end do
    end if
    sync all

    if (me == 1) then
      ! ---- get ----
      y(1:n) = 0_int8
      do k = 1, warm
        y(1:n) = x(1:n)[2]
      end do
      do k = 1, iters
        lat(k) = now_us()
        y(1:n) = x(1:n)[2]
        lat(k) = now_us() - lat(k)
      end do
      do r = 1, reps
        bw(r) = now_us()
        do k = 1, iters
          y(1:n) = x(1:n)[2]
        end do
        bw(r) = real(n, real64) * iters / (now_us() - bw(r))   ! bytes/us = MB/s
      end do
      do i = 1, n
        if (y(i) /= pattern(i, n, 1)) then
          nfail = nfail + 1
          write (*, '(a,i0,a,i0)') '# FAIL get: wrong byte at ', i, ' of size ', n
          exit
        end if
      end do
      call emit('caf_get', n, iters, median(lat), median(bw))

      ! ---- put ----
      do i = 1, n
        y(i) = pattern(i, n, 2)
      end do
      do k = 1, warm
        x(1:n)[2] = y(1:n)
      end do
      do k = 1, iters
        lat(k) = now_us()
        x(1:n)[2] = y(1:n)
        lat(k) = now_us() - lat(k)
      end do
      do r = 1, reps
        bw(r) = now_us()
        do k = 1, iters
          x(1:n)[2] = y(1:n)
        end do
        bw(r) = real(n, real64) * iters / (now_us() - bw(r))
      end do
      call emit('caf_put', n, iters, median(lat), median(bw))
    end if
    sync all
    if (me == 2) then
      do i = 1, n
        if (x(i) /= pattern(i, n, 2)) then
          nfail = nfail + 1
          write (*, '(a,i0,a,i0)') '# FAIL put: wrong byte at ', i, ' of size ', n
          exit
        end if
      end do
    end if
    if (n < maxb .and. n * step > maxb) then
      n = maxb                     ! always end on --max
    else
      n = n * step
    end if
  end do

  call end_checks('caf_putget', nfail)

contains

  elemental function pattern(i, n, which) result(b)
    integer(int64), intent(in) :: i, n
    integer, intent(in) :: which
    integer(int8) :: b
    b = int(mod(i * 31_int64 + n + 17_int64 * which, 251_int64) - 125_int64, int8)
  end function pattern

  include 'bench_util.inc'

  subroutine emit(op, n, iters, us, mbs)
    character(len=*), intent(in) :: op
    integer(int64), intent(in) :: n
    integer, intent(in) :: iters
    real(real64), intent(in) :: us, mbs
    character(len=24) :: a, b
    write (a, '(i0)') n
    write (b, '(i0)') iters
    write (*, '(a)') op//','//trim(a)//','//trim(b)//','//fmt(us, 3)//','//fmt(mbs, 2)
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
        step = 4
        reps = 3
      case ('--min', '--max', '--step', '--reps', '--iters')
        if (ia == na) call usage('missing value for '//trim(arg))
        call get_command_argument(ia + 1, val)
        select case (trim(arg))
        case ('--min'); minb = to_int(val)
        case ('--max'); maxb = to_int(val)
        case ('--step'); step = int(to_int(val))
        case ('--reps'); reps = int(to_int(val))
        case ('--iters'); iters_opt = int(to_int(val))
        end select
        ia = ia + 1
      case ('-h', '--help')
        call usage('')
      case default
        call usage('unknown argument '//trim(arg))
      end select
      ia = ia + 1
    end do
    if (minb < 1 .or. maxb < minb .or. step < 2 .or. reps < 1 .or. iters_opt < 0) &
      call usage('bad value')
  end subroutine parse_args

  subroutine usage(msg)
    character(len=*), intent(in) :: msg
    if (this_image() == 1) then
      if (len(msg) > 0) write (*, '(a)') 'caf_putget: '//msg
      write (*, '(a)') 'usage: caf_putget [--quick] [--min BYTES] [--max BYTES] ' // &
        '[--step 2|4] [--reps R] [--iters N]'
    end if
    if (len(msg) > 0) error stop 2
    stop
  end subroutine usage

end program caf_putget
