! caf_cannon.f90 -- Cannon's matrix multiply C = A B on a q x q image grid,
! blocks shifted with coarray puts.
!
!   cafrun -n P ./caf_cannon [--quick] [--block NB] [--reps R]
!
! P a perfect square (q = sqrt(P)): image (r, c) (row-major, 0-based) owns
! the NB x NB blocks A(r,c), B(r,c), C(r,c) of n x n matrices, n = q*NB.  The
! skew puts A(r,c) to image (r, c-r) and B(r,c) to image (r-c, c); then q
! steps of C += A B, each followed by a put of A to the left neighbour and
! of B to the one above (double buffers, one sync all per step).
! P not a perfect square (e.g. 2): the 1-D ring variant -- image p owns row
! block p of A, B and C (NB x n, n = P*NB); P steps of
! C(p,:) += A(p, kb) B(kb, :), the B row block put to image p-1 each step.
! The line "# algo=..." says which ran.
!
! A(I,K) = I + K and B(K,J) = K - J (global 1-based indices), so
!   C(I,J) = I*S1 - n*I*J + S2 - J*S1,  S1 = n(n+1)/2, S2 = n(n+1)(2n+1)/6,
! all integers exactly representable in real(8) (n < 100000): every image
! checks every element of its C block after every repetition.
!
! Time: from the sync all before the skew to the end of the last step, the
! slowest image (co_max), median over --reps after one warmup multiply.
! --quick runs 15 repetitions: over tcp a connection's first 36 messages
! each fault in a fresh receive buffer (docs/design.md, "What a rank
! costs"), so the first repetitions after the warmup measured that (4
! images, n = 128: 1.1 ms for the first, 0.58 from the fifth; with 3
! repetitions the median was 0.95-1.03 ms).
! Output (image 1): "# key=value" lines, header op,n,images,seconds,gflops
! and the row caf_cannon,<n>,<images>,<seconds>,<gflops> (2 n^3 flops).
! Exit 0 only if every check passed.
program caf_cannon
  use, intrinsic :: iso_fortran_env, only: int64, real64
  implicit none
  real(real64), allocatable :: ab(:, :, :)[:], bb(:, :, :)[:]
  real(real64), allocatable :: aloc(:, :), bloc(:, :), c(:, :), times(:)
  real(real64) :: t0, t, secs, gflops
  integer :: nb, reps, me, np, q, pr, pc, n, r, s, cur, nxt, nfail
  integer :: kb, lft, up
  logical :: quick, twod

  quick = .false.
  nb = 256
  reps = 11
  call parse_args()
  me = this_image()
  np = num_images()
  q = nint(sqrt(real(np, real64)))
  twod = (q * q == np)
  nfail = 0

  if (twod) then
    n = q * nb
    pr = (me - 1) / q
    pc = mod(me - 1, q)
    allocate (ab(nb, nb, 2)[*], bb(nb, nb, 2)[*])
    allocate (aloc(nb, nb), bloc(nb, nb), c(nb, nb))
    call fill_a(aloc, pr * nb, pc * nb)
    call fill_b(bloc, pr * nb, pc * nb)
    lft = img(pr, pc - 1)
    up = img(pr - 1, pc)
  else
    n = np * nb
    pr = me - 1
    ! A row block is local and never moves; B row blocks travel round the ring
    allocate (ab(1, 1, 1)[*], bb(nb, n, 2)[*])
    allocate (aloc(nb, n), bloc(nb, n), c(nb, n))
    call fill_a(aloc, pr * nb, 0)
    call fill_b(bloc, pr * nb, 0)
    lft = modulo(me - 2, np) + 1
    up = 0
  end if
  allocate (times(reps))

  if (me == 1) then
    write (*, '(a,i0)') '# bench=caf_cannon images=', np
    if (twod) then
      write (*, '(a,i0,a,i0,a,i0)') '# algo=cannon2d grid=', q, 'x', q, ' block=', nb
    else
      write (*, '(a,i0,a,i0)') '# algo=ring1d (images not a perfect square) ring=', np, &
        ' block=', nb
    end if
    write (*, '(a,i0,a,l1)') '# reps=', reps, ' quick=', quick
    write (*, '(a)') 'op,n,images,seconds,gflops'
  end if

  do r = 0, reps
    c = 0.0_real64
    sync all
    t0 = now_s()
    if (twod) then
      ab(:, :, 1)[img(pr, pc - pr)] = aloc
      bb(:, :, 1)[img(pr - pc, pc)] = bloc
      sync all
      do s = 1, q
        cur = 1 + mod(s - 1, 2)
        nxt = 3 - cur
        c = c + matmul(ab(:, :, cur), bb(:, :, cur))
        if (s < q) then
          ab(:, :, nxt)[lft] = ab(:, :, cur)
          bb(:, :, nxt)[up] = bb(:, :, cur)
          sync all
        end if
      end do
    else
      bb(:, :, 1) = bloc
      do s = 0, np - 1
        cur = 1 + mod(s, 2)
        nxt = 3 - cur
        kb = mod(me - 1 + s, np)          ! the B row block held at this step
        c = c + matmul(aloc(:, kb * nb + 1:(kb + 1) * nb), bb(:, :, cur))
        if (s < np - 1) then
          bb(:, :, nxt)[lft] = bb(:, :, cur)
          sync all
        end if
      end do
    end if
    t = now_s() - t0
    call check()
    call co_max(t)
    if (r >= 1) times(r) = t
  end do

  secs = median(times)
  gflops = 2.0_real64 * real(n, real64)**3 / secs / 1.0e9_real64
  if (me == 1) call emit(n, np, secs, gflops)

  call co_sum(nfail)
  if (nfail /= 0) then
    if (me == 1) write (*, '(a,i0,a)') '# caf_cannon: ', nfail, ' check(s) FAILED'
    error stop 1
  end if
  if (me == 1) write (*, '(a)') '# caf_cannon: all checks passed'

contains

  integer function img(rr, cc)
    integer, intent(in) :: rr, cc
    img = modulo(rr, q) * q + modulo(cc, q) + 1
  end function img

  ! x(i,k) = A(i0+i, k0+k) = (i0+i) + (k0+k)
  subroutine fill_a(x, i0, k0)
    real(real64), intent(out) :: x(:, :)
    integer, intent(in) :: i0, k0
    integer :: i, k
    do k = 1, size(x, 2)
      do i = 1, size(x, 1)
        x(i, k) = real(i0 + i + k0 + k, real64)
      end do
    end do
  end subroutine fill_a

  ! x(k,j) = B(k0+k, j0+j) = (k0+k) - (j0+j)
  subroutine fill_b(x, k0, j0)
    real(real64), intent(out) :: x(:, :)
    integer, intent(in) :: k0, j0
    integer :: k, j
    do j = 1, size(x, 2)
      do k = 1, size(x, 1)
        x(k, j) = real((k0 + k) - (j0 + j), real64)
      end do
    end do
  end subroutine fill_b

  subroutine check()
    integer :: i, j, gi, gj
    real(real64) :: s1, s2, want, dn
    dn = real(n, real64)
    s1 = dn * (dn + 1) / 2
    s2 = dn * (dn + 1) * (2 * dn + 1) / 6
    do j = 1, size(c, 2)
      do i = 1, size(c, 1)
        gi = pr * nb + i
        if (twod) then
          gj = pc * nb + j
        else
          gj = j
        end if
        want = gi * s1 - dn * real(gi, real64) * gj + s2 - gj * s1
        if (c(i, j) /= want) then
          nfail = nfail + 1
          write (*, '(a,i0,a,i0,a,i0,a)') '# FAIL cannon: image ', me, ' C(', gi, ',', gj, &
            ') wrong'
          return
        end if
      end do
    end do
  end subroutine check

  include 'bench_util.inc'

  subroutine emit(nn, images, sec, gf)
    integer, intent(in) :: nn, images
    real(real64), intent(in) :: sec, gf
    character(len=24) :: a, b
    write (a, '(i0)') nn
    write (b, '(i0)') images
    write (*, '(a)') 'caf_cannon,'//trim(a)//','//trim(b)//','//fmt(sec, 6)//','//fmt(gf, 3)
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
        nb = 64
        reps = 15
      case ('--block', '--reps')
        if (ia == na) call usage('missing value for '//trim(arg))
        call get_command_argument(ia + 1, val)
        if (trim(arg) == '--block') then
          read (val, *, iostat=ios) nb
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
    if (nb < 1 .or. reps < 1) call usage('bad value')
  end subroutine parse_args

  subroutine usage(msg)
    character(len=*), intent(in) :: msg
    if (this_image() == 1) then
      if (len(msg) > 0) write (*, '(a)') 'caf_cannon: '//msg
      write (*, '(a)') 'usage: caf_cannon [--quick] [--block NB] [--reps R]'
    end if
    if (len(msg) > 0) error stop 2
    stop
  end subroutine usage

end program caf_cannon
