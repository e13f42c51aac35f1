! caf_bitonic.f90 -- bitonic sort of N integer(8) keys over P images (P a
! power of two), the pairwise exchange done with coarray gets.
!
!   cafrun -n P ./caf_bitonic [--quick] [--keys N] [--reps R]
!
! Each image owns m = N/P keys (pseudo-random, 31-bit, regenerated for every
! repetition), sorts them locally (merge sort), then runs the log2(P)(log2(P)+1)/2
! compare-split steps of the bitonic network on blocks: at each step an image
! gets its partner's whole sorted block (buf = keys(:, cur)[partner]) and keeps
! the lower or the upper m keys of the union (merge-split) in its other buffer;
! one sync all per step (double buffering makes that enough).
!
! Checks after every repetition: each block sorted, the last key of image i <=
! the first key of image i+1 (a get), and two checksums of the whole key set
! (sum and sum of squares mod 65521, co_sum) unchanged by the sort.
! Time: from the sync all after key generation to the end of the last step
! (local sort included), slowest image (co_max), median over --reps after one
! warmup sort.  --quick runs 15 repetitions: over tcp a connection's first
! 36 messages each fault in a fresh receive buffer (docs/design.md, "What a
! rank costs"), so the first repetitions after the warmup measured that
! (Cannon: 1.1 ms for the first, 0.58 from the fifth).  Output (image 1): "# key=value" lines, header
! op,keys,images,seconds and the row caf_bitonic,<keys>,<images>,<seconds>.
! P not a power of two: prints "SKIP ..." and exits 0.
program caf_bitonic
  use, intrinsic :: iso_fortran_env, only: int64, real64
  implicit none
  integer(int64), allocatable :: keys(:, :)[:]
  integer(int64), allocatable :: buf(:), tmp(:)
  real(real64), allocatable :: times(:)
  real(real64) :: t0, t
  integer(int64) :: nkeys, m, sum0(2), sum1(2), nextfirst
  integer :: reps, me, np, me0, d, k, j, partner, cur, nxt, r, nfail
  logical :: quick, asc, keep_low

  quick = .false.
  nkeys = 4194304_int64
  reps = 5
  call parse_args()
  me = this_image()
  np = num_images()
  me0 = me - 1

  if (iand(np, np - 1) /= 0) then
    ! no STOP here: OpenCoarrays turns a STOP on every image into an MPI_Abort
    if (me == 1) write (*, '(a,i0,a)') 'SKIP caf_bitonic: ', np, &
      ' images is not a power of two'
  else
    call run()
  end if

contains

  subroutine run()
  if (mod(nkeys, int(np, int64)) /= 0) then
    if (me == 1) write (*, '(a)') 'caf_bitonic: --keys must be a multiple of the image count'
    error stop 2
  end if
  m = nkeys / np
  d = 0
  do while (ishft(1, d) < np)
    d = d + 1
  end do
  allocate (keys(m, 2)[*])
  allocate (buf(m), tmp(m), times(reps))
  nfail = 0

  if (me == 1) then
    write (*, '(a,i0)') '# bench=caf_bitonic images=', np
    write (*, '(a,i0,a,i0,a,i0)') '# keys=', nkeys, ' per_image=', m, ' steps=', d * (d + 1) / 2
    write (*, '(a,i0,a,l1)') '# reps=', reps, ' quick=', quick
    write (*, '(a)') 'op,keys,images,seconds'
  end if

  do r = 0, reps
    sync all                       ! nobody still reads last repetition's keys
    call generate(keys(:, 1), r)
    call checksums(keys(:, 1), sum0)
    sync all
    t0 = now_s()
    call merge_sort(keys(:, 1), tmp)
    sync all
    cur = 1
    do k = 1, d
      asc = iand(ishft(me0, -k), 1) == 0       ! direction of my 2^k group
      do j = k - 1, 0, -1
        partner = ieor(me0, ishft(1, j))
        keep_low = (me0 < partner) .eqv. asc
        nxt = 3 - cur
        ! explicit bounds on the left: `buf(:) = ...` or `buf = ...` (buf is
        ! allocatable) makes gfortran call _gfortran_caf_get_by_ref, which
        ! OpenCoarrays 2.10 serves one element at a time (1 s for 96 KiB
        ! over tcp); `buf(1:m) = ...` is the _gfortran_caf_get fast path.
        buf(1:m) = keys(1:m, cur)[partner + 1]
        if (keep_low) then
          call merge_low(keys(:, cur), buf, keys(:, nxt))
        else
          call merge_high(keys(:, cur), buf, keys(:, nxt))
        end if
        sync all
        cur = nxt
      end do
    end do
    t = now_s() - t0

    ! checks
    do k = 2, int(m)
      if (keys(k - 1, cur) > keys(k, cur)) then
        nfail = nfail + 1
        write (*, '(a,i0,a,i0)') '# FAIL bitonic: image ', me, ' unsorted at ', k
        exit
      end if
    end do
    if (me < np) then
      nextfirst = keys(1, cur)[me + 1]
      if (keys(m, cur) > nextfirst) then
        nfail = nfail + 1
        write (*, '(a,i0,a,i0)') '# FAIL bitonic: order between images ', me, ' and ', me + 1
      end if
    end if
    call checksums(keys(:, cur), sum1)
    if (any(sum0 /= sum1)) then
      if (me == 1) write (*, '(a)') '# FAIL bitonic: checksum changed (keys lost or duplicated)'
      nfail = nfail + 1
    end if
    call co_max(t)
    if (r >= 1) times(r) = t
  end do

  if (me == 1) call emit(nkeys, np, median(times))
  call co_sum(nfail)
  if (nfail /= 0) then
    if (me == 1) write (*, '(a,i0,a)') '# caf_bitonic: ', nfail, ' check(s) FAILED'
    error stop 1
  end if
  if (me == 1) write (*, '(a)') '# caf_bitonic: all checks passed'
  end subroutine run

  ! Park-Miller minimal standard generator (48271), one stream per image and
  ! repetition; products stay below 2^47, no overflow.
  subroutine generate(x, rep)
    integer(int64), intent(out) :: x(:)
    integer, intent(in) :: rep
    integer(int64) :: s
    integer(int64) :: i
    s = mod(12345_int64 + 7919_int64 * me + 104729_int64 * rep, 2147483647_int64)
    do i = 1, 10
      s = mod(s * 48271_int64, 2147483647_int64)
    end do
    do i = 1, size(x, kind=int64)
      s = mod(s * 48271_int64, 2147483647_int64)
      x(i) = s
    end do
  end subroutine generate

  ! global sum and sum of squares mod 65521 (both fit int64 for N < 2^32)
  subroutine checksums(x, cs)
    integer(int64), intent(in) :: x(:)
    integer(int64), intent(out) :: cs(2)
    cs(1) = sum(x)
    cs(2) = sum(mod(x, 65521_int64)**2)
    call co_sum(cs)
  end subroutine checksums

  ! bottom-up merge sort of x, w scratch of the same size
  subroutine merge_sort(x, w)
    integer(int64), intent(inout) :: x(:)
    integer(int64), intent(inout) :: w(:)
    integer(int64) :: n, width, lo, mid, hi, i, j, o
    logical :: in_x
    n = size(x, kind=int64)
    width = 1
    in_x = .true.
    do while (width < n)
      lo = 1
      do while (lo <= n)
        mid = min(lo + width, n + 1)
        hi = min(lo + 2 * width, n + 1)
        i = lo; j = mid; o = lo
        if (in_x) then
          do while (o < hi)
            if (j >= hi) then
              w(o) = x(i); i = i + 1
            else if (i >= mid) then
              w(o) = x(j); j = j + 1
            else if (x(i) <= x(j)) then
              w(o) = x(i); i = i + 1
            else
              w(o) = x(j); j = j + 1
            end if
            o = o + 1
          end do
        else
          do while (o < hi)
            if (j >= hi) then
              x(o) = w(i); i = i + 1
            else if (i >= mid) then
              x(o) = w(j); j = j + 1
            else if (w(i) <= w(j)) then
              x(o) = w(i); i = i + 1
            else
              x(o) = w(j); j = j + 1
            end if
            o = o + 1
          end do
        end if
        lo = hi
      end do
      in_x = .not. in_x
      width = 2 * width
    end do
    if (.not. in_x) x = w
  end subroutine merge_sort

  ! out = the size(a) smallest of a and b (both sorted ascending)
  subroutine merge_low(a, b, out)
    integer(int64), intent(in) :: a(:), b(:)
    integer(int64), intent(out) :: out(:)
    integer(int64) :: i, j, o
    i = 1; j = 1
    do o = 1, size(out, kind=int64)
      if (a(i) <= b(j)) then
        out(o) = a(i); i = i + 1
      else
        out(o) = b(j); j = j + 1
      end if
    end do
  end subroutine merge_low

  ! out = the size(a) largest of a and b (both sorted ascending)
  subroutine merge_high(a, b, out)
    integer(int64), intent(in) :: a(:), b(:)
    integer(int64), intent(out) :: out(:)
    integer(int64) :: i, j, o
    i = size(a, kind=int64); j = size(b, kind=int64)
    do o = size(out, kind=int64), 1, -1
      if (a(i) >= b(j)) then
        out(o) = a(i); i = i - 1
      else
        out(o) = b(j); j = j - 1
      end if
    end do
  end subroutine merge_high

  include 'bench_util.inc'

  subroutine emit(nk, images, sec)
    integer(int64), intent(in) :: nk
    integer, intent(in) :: images
    real(real64), intent(in) :: sec
    character(len=24) :: a, b
    character(len=40) :: c
    character(len=:), allocatable :: cs
    write (a, '(i0)') nk
    write (b, '(i0)') images
    write (c, '(f0.6)') sec
    cs = trim(adjustl(c))
    if (cs(1:1) == '.') cs = '0'//cs
    write (*, '(a)') 'caf_bitonic,'//trim(a)//','//trim(b)//','//cs
    flush (6)
  end subroutine emit

  subroutine parse_args()
    integer :: ia, na, ios
    character(len=256) :: arg, val
    na = command_argument_count()
    ia = 1
    do while (ia <= na)
      call get_command_argument(ia, arg)
      select case (trim(arg))
      case ('--quick')
        quick = .true.
        nkeys = 65536_int64
        reps = 15
      case ('--keys', '--reps')
        if (ia == na) call usage('missing value for '//trim(arg))
        call get_command_argument(ia + 1, val)
        if (trim(arg) == '--keys') then
          read (val, *, iostat=ios) nkeys
        else
          read (val, *, iostat=ios) reps
        end if
        if (ios /= 0) call usage('not a number: '//trim(val))
        ia = ia + 1
      case ('-h', '--help')
        call usage('')
      case default
        call usage('unknown argument '//trim(arg))
      end select
      ia = ia + 1
    end do
    if (nkeys < 1 .or. reps < 1) call usage('bad value')
  end subroutine parse_args

  subroutine usage(msg)
    character(len=*), intent(in) :: msg
    if (this_image() == 1) then
      if (len(msg) > 0) write (*, '(a)') 'caf_bitonic: '//msg
      write (*, '(a)') 'usage: caf_bitonic [--quick] [--keys N] [--reps R]'
    end if
    if (len(msg) > 0) error stop 2
    stop
  end subroutine usage

end program caf_bitonic
