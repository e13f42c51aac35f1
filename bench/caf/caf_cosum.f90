! caf_cosum.f90 -- co_sum latency on all images, 8 B and 1 MiB of real(8).
!
!   cafrun -n P ./caf_cosum [--quick] [--reps R] [--elems N]
!
! Two sizes: one real(8) (8 B) and N real(8) (--elems, default 131072 = 1 MiB).
! Each repetition: every image refills its buffer (outside the timing), sync
! all, then times one `call co_sum(buf)`; the repetition's time is the slowest
! image's (co_max, outside the timing).  Reported: the median over --reps after
! a few warmup calls (8 B: ten times --reps, it is cheap; with the 11 of
! --quick the median was a start-up figure: each of a connection's first
! 36 messages lands in a receive buffer never touched before, a page fault
! that made the first ~35 collectives of a 2-image job ~3 us slower,
! docs/design.md "What a rank costs").  Every result is checked against its closed form:
! image i contributes i + mod(k, 7) at element k, so element k must equal
! P(P+1)/2 + P*mod(k, 7) exactly (small integers, exact in real(8)).
!
! Output (image 1): "# key=value" lines, the header op,bytes,images,median_us
! and rows caf_cosum,<bytes>,<images>,<median_us>.  Exit 0 only if all checks
! passed.
program caf_cosum
  use, intrinsic :: iso_fortran_env, only: int64, real64
  implicit none
  real(real64), allocatable :: buf(:), times(:)
  real(real64) :: t0, t
  integer(int64) :: elems, nel
  integer :: reps, nrep, warm, r, me, np, nfail, s, k
  logical :: quick

  quick = .false.
  reps = 51
  elems = 131072_int64
  call parse_args()
  me = this_image()
  np = num_images()
  warm = 3
  allocate (buf(elems), times(10 * reps))
  nfail = 0

  if (me == 1) then
    write (*, '(a,i0)') '# bench=caf_cosum images=', np
    write (*, '(a,i0,a,l1)') '# reps=', reps, ' quick=', quick
    write (*, '(a)') '# timer=system_clock_int64 time=max_over_images'
    write (*, '(a)') 'op,bytes,images,median_us'
  end if

  do s = 1, 2
    if (s == 1) then
      nel = 1
      nrep = 10 * reps
    else
      nel = elems
      nrep = reps
    end if
    do r = 1 - warm, nrep
      do k = 1, int(nel)
        buf(k) = real(me + mod(k, 7), real64)
      end do
      sync all
      t0 = now_us()
      call co_sum(buf(1:nel))
      t = now_us() - t0
      call check(buf(1:nel))
      call co_max(t)
      if (r >= 1) times(r) = t
    end do
    if (me == 1) call emit(nel * 8_int64, np, median(times(1:nrep)))
  end do

  call co_sum(nfail)
  if (nfail /= 0) then
    if (me == 1) write (*, '(a,i0,a)') '# caf_cosum: ', nfail, ' check(s) FAILED'
    error stop 1
  end if
  if (me == 1) write (*, '(a)') '# caf_cosum: all checks passed'

contains

  subroutine check(v)
    real(real64), intent(in) :: v(:)
    integer :: i
    real(real64) :: want
    do i = 1, size(v)
      want = real(np, real64) * (np + 1) / 2 + real(np, real64) * mod(i, 7)
      if (v(i) /= want) then
        nfail = nfail + 1
        write (*, '(a,i0,a,i0,a,i0)') '# FAIL co_sum: image ', me, ' element ', i, &
          ' of ', size(v)
        return
      end if
    end do
  end subroutine check

  include 'bench_util.inc'

  subroutine emit(bytes, images, us)
    integer(int64), intent(in) :: bytes
    integer, intent(in) :: images
    real(real64), intent(in) :: us
    character(len=40) :: a, b, c
    character(len=:), allocatable :: cs
    write (a, '(i0)') bytes
    write (b, '(i0)') images
    write (c, '(f0.3)') us
    cs = trim(adjustl(c))
    if (cs(1:1) == '.') cs = '0'//cs
    write (*, '(a)') 'caf_cosum,'//trim(a)//','//trim(b)//','//cs
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
        reps = 11
      case ('--reps', '--elems')
        if (ia == na) call usage('missing value for '//trim(arg))
        call get_command_argument(ia + 1, val)
        if (trim(arg) == '--reps') then
          reps = int(to_int(val))
        else
          elems = to_int(val)
        end if
        ia = ia + 1
      case ('-h', '--help')
        call usage('')
      case default
        call usage('unknown argument '//trim(arg))
      end select
      ia = ia + 1
    end do
    if (reps < 1 .or. elems < 1) call usage('bad value')
  end subroutine parse_args

  subroutine usage(msg)
    character(len=*), intent(in) :: msg
    if (this_image() == 1) then
      if (len(msg) > 0) write (*, '(a)') 'caf_cosum: '//msg
      write (*, '(a)') 'usage: caf_cosum [--quick] [--reps R] [--elems N]'
    end if
    if (len(msg) > 0) error stop 2
    stop
  end subroutine usage

end program caf_cosum
