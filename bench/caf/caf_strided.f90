! caf_strided.f90 -- strided coarray put and get, image 1 -> image 2.
!
!   cafrun -n 2 ./caf_strided [--quick] [--stride S] [--max ELEMS] [--iters N]
!                             [--seconds T]
!
! For each count n of real(8) elements (1, 1024, 32768, 1048576 by default;
! 1024 and 1048576 with --quick; --max caps them) image 1 runs
!   put: x(1:S*(n-1)+1:S)[2] = y(1:S*(n-1)+1:S)
!   get: y(1:S*(n-1)+1:S) = x(1:S*(n-1)+1:S)[2]
! with stride S (default 2): every S-th element, n of them, one statement.
! Latency: each statement timed on its own (system_clock, int64 count),
! median over `iters` timed statements after a warmup (fewer when they take
! longer than --seconds in all, at least 1: OpenCoarrays over tcp moves a
! strided section element by element); MB/s = 8 n bytes / median.  The get is checked on image 1; the put on image 2, which also
! checks that the elements between the strided ones kept their value.
!
! Output (image 1, stdout): "# key=value" lines, the column header
!   op,elems,iters,median_us,MB_s
! and one row per op and count, e.g. caf_sput,1048576,4,12345.678,679.55
! (MB = 1e6 bytes of payload).  Exit status 0 only if every check passed.
program caf_strided
  use, intrinsic :: iso_fortran_env, only: int64, real64
  implicit none
  real(real64), allocatable :: x(:)[:]
  real(real64), allocatable :: y(:), lat(:)
  integer(int64) :: maxn, n, span, i, budget, last
  integer(int64) :: counts(4)
  integer :: stride, iters_opt, iters, warm, k, c, me, nfail, done
  real(real64) :: tmax, t0
  logical :: quick

  quick = .false.
  stride = 2; maxn = 1048576; iters_opt = 0; tmax = 10.0_real64
  call parse_args()
  budget = 4194304_int64           ! elements moved per op and count
  if (quick) budget = 2097152_int64
  counts = [1_int64, 1024_int64, 32768_int64, 1048576_int64]
  last = 0

  me = this_image()
  if (num_images() < 2) then
    if (me == 1) write (*, '(a)') 'caf_strided: needs at least 2 images'
    error stop 2
  end if
  allocate (x(stride * maxn)[*])
  allocate (y(stride * maxn))
  x = -1.0_real64
  y = -1.0_real64
  nfail = 0

  if (me == 1) then
    write (*, '(a,i0)') '# bench=caf_strided images=', num_images()
    write (*, '(a,i0,a,l1)') '# stride=', stride, ' quick=', quick
    write (*, '(a)') '# timer=system_clock_int64'
    write (*, '(a)') 'op,elems,iters,median_us,MB_s'
  end if

  do c = 1, size(counts)
    n = min(counts(c), maxn)
    if (quick .and. c /= 2 .and. c /= 4) cycle
    if (n == last) cycle             ! --max folded two counts into one
    last = n
    span = stride * (n - 1) + 1
    if (iters_opt > 0) then
      iters = iters_opt
    else
      iters = int(max(3_int64, min(200_int64, budget / n)))
    end if
    warm = max(1, iters / 10)
    if (allocated(lat)) deallocate (lat)
    allocate (lat(iters))

    ! image 2 publishes the get pattern before the sync
    if (me == 2) then
      do i = 1, stride * maxn
        x(i) = value(i, n, 1)
      end do
    end if
    sync all

    if (me == 1) then
      ! ---- get ----
      y = -1.0_real64
      do k = 1, warm
        y(1:span:stride) = x(1:span:stride)[2]
      end do
      t0 = now_s()
      do k = 1, iters
        lat(k) = now_us()
        y(1:span:stride) = x(1:span:stride)[2]
        lat(k) = now_us() - lat(k)
        done = k
        if (now_s() - t0 > tmax) exit
      end do
      do i = 1, stride * maxn
        if (y(i) /= merge(value(i, n, 1), -1.0_real64, i <= span .and. mod(i - 1, stride) == 0)) then
          nfail = nfail + 1
          write (*, '(a,i0,a,i0)') '# FAIL get: wrong element ', i, ' of count ', n
          exit
        end if
      end do
      call emit('caf_sget', n, done, median(lat(1:done)))

      ! ---- put ----
      do i = 1, stride * maxn
        y(i) = value(i, n, 2)
      end do
      do k = 1, warm
        x(1:span:stride)[2] = y(1:span:stride)
      end do
      t0 = now_s()
      do k = 1, iters
        lat(k) = now_us()
        x(1:span:stride)[2] = y(1:span:stride)
        lat(k) = now_us() - lat(k)
        done = k
        if (now_s() - t0 > tmax) exit
      end do
      call emit('caf_sput', n, done, median(lat(1:done)))
    end if
    sync all
    if (me == 2) then
      do i = 1, stride * maxn
        if (x(i) /= merge(value(i, n, 2), value(i, n, 1), i <= span .and. mod(i - 1, stride) == 0)) then
          nfail = nfail + 1
          write (*, '(a,i0,a,i0)') '# FAIL put: wrong element ', i, ' of count ', n
          exit
        end if
      end do
    end if
  end do

  call end_checks('caf_strided', nfail)

contains

  elemental function value(i, n, which) result(v)
    integer(int64), intent(in) :: i, n
    integer, intent(in) :: which
    real(real64) :: v
    v = real(mod(i * 7_int64 + n + 1000003_int64 * which, 1000033_int64), real64)
  end function value

  include 'bench_util.inc'

  subroutine emit(op, n, iters, us)
    character(len=*), intent(in) :: op
    integer(int64), intent(in) :: n
    integer, intent(in) :: iters
    real(real64), intent(in) :: us
    character(len=24) :: a, b
    write (a, '(i0)') n
    write (b, '(i0)') iters
    write (*, '(a)') op//','//trim(a)//','//trim(b)//','//fmt(us, 3)//','// &
      fmt(8.0_real64 * real(n, real64) / us, 2)
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
        tmax = 2.0_real64
      case ('--stride', '--max', '--iters', '--seconds')
        if (ia == na) call usage('missing value for '//trim(arg))
        call get_command_argument(ia + 1, val)
        select case (trim(arg))
        case ('--stride'); stride = int(to_int(val))
        case ('--max'); maxn = to_int(val)
        case ('--iters'); iters_opt = int(to_int(val))
        case ('--seconds'); tmax = real(to_int(val), real64)
        end select
        ia = ia + 1
      case ('-h', '--help')
        call usage('')
      case default
        call usage('unknown argument '//trim(arg))
      end select
      ia = ia + 1
    end do
    if (stride < 1 .or. maxn < 1 .or. iters_opt < 0 .or. tmax < 1.0_real64) &
      call usage('--stride, --max and --seconds must be >= 1')
  end subroutine parse_args

  subroutine usage(msg)
    character(len=*), intent(in) :: msg
    call usage_exit('caf_strided', msg, '[--quick] [--stride S] [--max ELEMS] [--iters N] [--seconds T]')
  end subroutine usage
end program caf_strided
