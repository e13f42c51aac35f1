! caf_coll.f90 -- collective subroutines.
!
! Checks co_sum, co_min, co_max, co_broadcast and co_reduce with:
!  * scalars and arrays of rank 1-3, including non-contiguous actual
!    arguments (x(1:9:2), m(:, 2:4:2));
!  * integer kinds 1, 2, 4, 8; real kinds 4, 8; complex 4, 8 (co_sum);
!    character (co_min, co_max, co_broadcast, co_reduce); a derived type
!    (co_broadcast, co_reduce);
!  * with and without result_image= (only the result image's value is
!    checked; on the others it is undefined), with stat= and errmsg=
!    (stat = 0, errmsg unchanged on success);
!  * co_reduce with user operations (pure functions; gfortran 12 rejects an
!    ELEMENTAL procedure as the OPERATION actual argument): integer
!    product, character maximum, and an associative but NOT commutative
!    operation (composition of affine maps) whose result must equal the
!    composition in some order of the images' maps;
!  * hundreds of back-to-back collective calls with varying roots;
!  * a 1 MiB integer array co_sum.
!
! OpenCoarrays 2.10.1 fails: co_min/co_max on character abort with "MPI_MAX
! is not defined for non-intrinsic datatypes"; co_reduce on character and
! on derived types stops with "Data type not yet supported for co_reduce".
! Everything else passes on 1, 2, 3, 4 and 8 images.
!
! ALSO-ENV: FH_SHM=off
! (runs also with it: the message path; as is, on one machine, the node path)
! Prints "PASS caf_coll" on image 1 on success; otherwise
! "FAIL caf_coll image <i>: ..." and error stop 1.  Any image count.
! Types and co_reduce operations live in a module: internal procedures
! passed as OPERATION would need trampolines (an executable stack).
module caf_coll_ops
  implicit none
  type :: rec_t
    integer :: id = 0
    real(8) :: w(3) = 0
    character(len=5) :: name = ''
  end type rec_t
  type :: affine_t              ! x -> a*x + b
    integer(8) :: a = 1, b = 0
  end type affine_t
contains

  pure integer(8) function mul_i8(x, y)
    integer(8), intent(in) :: x, y
    mul_i8 = x * y
  end function mul_i8

  pure integer(8) function add_i8(x, y)
    integer(8), intent(in) :: x, y
    add_i8 = x + y
  end function add_i8

  pure integer function add_i4(x, y)
    integer, intent(in) :: x, y
    add_i4 = x + y
  end function add_i4

  pure character(len=6) function max_s6(x, y)
    character(len=6), intent(in) :: x, y
    max_s6 = merge(x, y, x > y)
  end function max_s6

  pure type(rec_t) function combine_rec(x, y)
    type(rec_t), intent(in) :: x, y
    combine_rec%id = x%id + y%id
    combine_rec%w = [max(x%w(1), y%w(1)), x%w(2) + y%w(2), max(x%w(3), y%w(3))]
    combine_rec%name = x%name
  end function combine_rec

  ! composition of affine maps: (f o g)(x) = f%a * (g%a * x + g%b) + f%b
  ! associative, not commutative
  pure type(affine_t) function compose(f, g)
    type(affine_t), intent(in) :: f, g
    compose%a = f%a * g%a
    compose%b = f%a * g%b + f%b
  end function compose

end module caf_coll_ops

program caf_coll
  use caf_coll_ops
  implicit none
  character(*), parameter :: test_name = 'caf_coll'
  integer, parameter :: nbig = 256 * 1024      ! 1 MiB of integer(4)
  integer :: me, n, i, j, k, iter, st, root, tri
  integer(1) :: i1, i1v(3)
  integer(2) :: i2, i2v(4)
  integer(4) :: i4, i4v(10), i4m(3, 5), i4c(2, 3, 4)
  integer(8) :: i8, i8v(2)
  real(4) :: r4, r4v(5)
  real(8) :: r8, r8m(4, 4)
  complex(4) :: c4
  complex(8) :: c8v(3)
  character(len=6) :: s6, s6v(2)
  character(len=40) :: msg
  type(rec_t) :: rec, recs(2)
  type(affine_t) :: aff
  integer, allocatable :: big(:)

  me = this_image()
  n = num_images()
  tri = n * (n + 1) / 2

  ! ---- co_sum ---------------------------------------------------------
  i1 = int(me, 1)
  call co_sum(i1)
  call check(int(i1) == tri, 'co_sum integer(1) scalar')
  i2v = int([me, -me, 2 * me, 100], 2)
  call co_sum(i2v)
  call check(all(i2v == int([tri, -tri, 2 * tri, 100 * n], 2)), 'co_sum integer(2) array')
  i4m = reshape([(me * k, k = 1, 15)], [3, 5])
  call co_sum(i4m)
  call check(all(i4m == reshape([(tri * k, k = 1, 15)], [3, 5])), 'co_sum integer(4) rank-2')
  i4c = reshape([(me + k, k = 1, 24)], [2, 3, 4])
  call co_sum(i4c)
  call check(all(i4c == reshape([(tri + n * k, k = 1, 24)], [2, 3, 4])), 'co_sum integer(4) rank-3')
  i8 = int(me, 8) * 2_8**40
  call co_sum(i8)
  call check(i8 == int(tri, 8) * 2_8**40, 'co_sum integer(8) scalar')
  r4v = [(real(me * k, 4) * 0.5, k = 1, 5)]
  call co_sum(r4v)
  call check(all(r4v == [(real(tri * k, 4) * 0.5, k = 1, 5)]), 'co_sum real(4) array')
  r8m = reshape([(me * 0.25d0 * k, k = 1, 16)], [4, 4])
  call co_sum(r8m)
  call check(all(r8m == reshape([(tri * 0.25d0 * k, k = 1, 16)], [4, 4])), 'co_sum real(8) rank-2')
  c4 = cmplx(me, -2 * me, 4)
  call co_sum(c4)
  call check(c4 == cmplx(tri, -2 * tri, 4), 'co_sum complex(4) scalar')
  c8v = [(cmplx(me * k, me, 8), k = 1, 3)]
  call co_sum(c8v)
  call check(all(c8v == [(cmplx(tri * k, tri, 8), k = 1, 3)]), 'co_sum complex(8) array')
  ! non-contiguous actual arguments: the gaps must stay untouched
  i4v = [(me * 10 + k, k = 1, 10)]
  call co_sum(i4v(1:9:2))
  call check(all(i4v(1:9:2) == [(tri * 10 + n * k, k = 1, 9, 2)]), 'co_sum on x(1:9:2)')
  call check(all(i4v(2:10:2) == [(me * 10 + k, k = 2, 10, 2)]), 'co_sum on x(1:9:2) left the gaps alone')
  i4m = reshape([(me * k, k = 1, 15)], [3, 5])
  call co_sum(i4m(:, 2:4:2))
  call check(all(i4m(:, 2:4:2) == reshape([(tri * k, k = 4, 6), (tri * k, k = 10, 12)], [3, 2])), 'co_sum on m(:,2:4:2)')
  call check(all(i4m(:, [1, 3, 5]) == reshape([(me * k, k = 1, 3), (me * k, k = 7, 9), (me * k, k = 13, 15)], [3, 3])), &
             'co_sum on m(:,2:4:2) left the other columns alone')
  ! result_image, stat, errmsg
  root = n
  i4 = me
  st = -1
  msg = 'untouched'
  call co_sum(i4, result_image=root, stat=st, errmsg=msg)
  call check(st == 0, 'co_sum stat= is 0')
  call check(msg == 'untouched', 'co_sum errmsg= unchanged on success')
  if (me == root) call check(i4 == tri, 'co_sum result_image=n')
  r8 = me
  call co_sum(r8, 1)
  if (me == 1) call check(r8 == tri, 'co_sum result_image=1 (positional)')

  ! ---- co_min / co_max ------------------------------------------------
  i1v = int([me, -me, 3], 1)
  call co_max(i1v)
  call check(all(i1v == int([n, -1, 3], 1)), 'co_max integer(1) array')
  i2 = int(1000 - me, 2)
  call co_min(i2)
  call check(i2 == 1000 - n, 'co_min integer(2) scalar')
  i8v = [int(me, 8) * 2_8**33, -int(me, 8)]
  call co_min(i8v, stat=st)
  call check(st == 0 .and. all(i8v == [2_8**33, -int(n, 8)]), 'co_min integer(8) array, stat=')
  r4 = -0.5 * me
  call co_max(r4, result_image=1)
  if (me == 1) call check(r4 == -0.5, 'co_max real(4) result_image=1')
  r8m = reshape([(modulo(me * k, 7) + 0d0, k = 1, 16)], [4, 4])
  call co_max(r8m(2:4:2, ::3))
  do j = 1, 4, 3
    do i = 2, 4, 2
      call check(r8m(i, j) == maxval([(modulo(k * (i + 4 * (j - 1)), 7) + 0d0, k = 1, n)]), 'co_max real(8) on m(2:4:2,::3)')
    end do
  end do
  s6 = 'img' // achar(48 + mod(me, 10)) // 'zz'
  call co_max(s6)
  call check(s6 == 'img' // achar(48 + mod(maxloc([(mod(k, 10), k = 1, n)], 1), 10)) // 'zz', 'co_max character')
  s6v = ['b' // achar(64 + me) // 'cdef', 'x     ']
  msg = 'untouched'
  call co_min(s6v, stat=st, errmsg=msg)
  call check(st == 0 .and. msg == 'untouched', 'co_min character stat/errmsg')
  call check(s6v(1) == 'bAcdef' .and. s6v(2) == 'x', 'co_min character array')

  ! ---- co_broadcast --------------------------------------------------
  root = max(1, n - 1)
  i4c = me
  call co_broadcast(i4c, source_image=root)
  call check(all(i4c == root), 'co_broadcast integer rank-3')
  r4v = [(me * 1.5 + k, k = 1, 5)]
  call co_broadcast(r4v(5:1:-2), n)
  call check(all(r4v(5:1:-2) == [(n * 1.5 + k, k = 5, 1, -2)]) .and. all(r4v(2:4:2) == [me * 1.5 + 2, me * 1.5 + 4]), &
             'co_broadcast on non-contiguous r(5:1:-2)')
  s6 = 'from' // achar(48 + mod(me, 10)) // '!'
  call co_broadcast(s6, 1, stat=st, errmsg=msg)
  call check(st == 0 .and. s6 == 'from1!', 'co_broadcast character')
  rec = rec_t(me, [me * 1d0, -me * 1d0, 0.5d0], 'rec' // achar(48 + mod(me, 10)) // '.')
  call co_broadcast(rec, source_image=n)
  call check(rec%id == n .and. all(rec%w == [n * 1d0, -n * 1d0, 0.5d0]) .and. &
             rec%name == 'rec' // achar(48 + mod(n, 10)) // '.', 'co_broadcast derived type scalar')
  recs(1) = rec_t(-me, 1d0, 'a')
  recs(2) = rec_t(me * 2, 2d0, 'b')
  call co_broadcast(recs, source_image=1)
  call check(recs(1)%id == -1 .and. recs(2)%id == 2 .and. recs(2)%name == 'b', 'co_broadcast derived type array')

  ! ---- co_reduce -------------------------------------------------------
  i8 = me
  call co_reduce(i8, mul_i8)
  call check(i8 == product([(int(k, 8), k = 1, n)]), 'co_reduce integer(8) product')
  i4v = [(me + k, k = 1, 10)]
  call co_reduce(i4v(2:10:4), add_i4, result_image=n, stat=st)
  call check(st == 0, 'co_reduce stat=')
  if (me == n) call check(all(i4v(2:10:4) == [(tri + n * k, k = 2, 10, 4)]), 'co_reduce on x(2:10:4), result_image')
  s6v = ['m' // achar(64 + me) // 'xyz', 'same  ']
  call co_reduce(s6v, max_s6)
  call check(s6v(1) == 'm' // achar(64 + n) // 'xyz' .and. s6v(2) == 'same', 'co_reduce character max')
  rec = rec_t(me, [1d0 * me, 1d0, -1d0 * me], 'r')
  call co_reduce(rec, combine_rec)
  call check(rec%id == tri .and. all(rec%w == [1d0 * n, 1d0 * n, -1d0]), 'co_reduce derived type')
  aff = affine_t(int(me + 1, 8), int(me, 8))
  msg = 'untouched'
  call co_reduce(aff, compose, stat=st, errmsg=msg)
  call check(st == 0 .and. msg == 'untouched', 'co_reduce non-commutative stat/errmsg')
  call check(aff%a == product([(int(k + 1, 8), k = 1, n)]), 'co_reduce affine composition: slope')
  call check(some_order_gives(aff%b, n), 'co_reduce affine composition: offset matches no image order')

  ! ---- many calls in a row ---------------------------------------------
  do iter = 1, 300
    root = mod(iter, n) + 1
    select case (mod(iter, 5))
    case (0)
      i4 = me + iter
      call co_sum(i4)
      call check(i4 == tri + n * iter, 'repeated co_sum')
    case (1)
      i4 = me * iter
      call co_broadcast(i4, root)
      call check(i4 == root * iter, 'repeated co_broadcast')
    case (2)
      i4v = me + iter
      call co_max(i4v, result_image=root)
      if (me == root) call check(all(i4v == n + iter), 'repeated co_max result_image')
    case (3)
      r8 = me - iter
      call co_min(r8)
      call check(r8 == 1 - iter, 'repeated co_min')
    case default
      i8 = iter
      call co_reduce(i8, add_i8, result_image=root)
      if (me == root) call check(i8 == int(iter, 8) * n, 'repeated co_reduce')
    end select
  end do

  ! ---- 1 MiB co_sum --------------------------------------------------------
  allocate(big(nbig))
  big = [(mod(i, 1000) + me, i = 1, nbig)]
  call co_sum(big)
  call check(all(big == [(n * mod(i, 1000) + tri, i = 1, nbig)]), '1 MiB co_sum')
  big = me
  call co_sum(big, result_image=1)
  if (me == 1) call check(all(big == tri), '1 MiB co_sum result_image=1')

  sync all
  if (me == 1) write(*, '(a)') 'PASS caf_coll'

contains

  ! true if composing the images' maps (k+1, k), k = 1..nimg, in some
  ! order gives offset b
  logical function some_order_gives(b, nimg)
    integer(8), intent(in) :: b
    integer, intent(in) :: nimg
    integer :: perm(nimg)
    integer :: p
    some_order_gives = .false.
    perm = [(p, p = 1, nimg)]
    do
      if (offset_of(perm) == b) then
        some_order_gives = .true.
        return
      end if
      if (.not. next_permutation(perm)) return
    end do
  end function some_order_gives

  integer(8) function offset_of(perm)
    integer, intent(in) :: perm(:)
    type(affine_t) :: acc
    integer :: p
    acc = affine_t(1_8, 0_8)
    do p = 1, size(perm)
      acc = compose(acc, affine_t(int(perm(p) + 1, 8), int(perm(p), 8)))
    end do
    offset_of = acc%b
  end function offset_of

  logical function next_permutation(perm)
    integer, intent(inout) :: perm(:)
    integer :: p, q, t
    next_permutation = .false.
    p = size(perm) - 1
    do while (p >= 1)
      if (perm(p) < perm(p + 1)) exit
      p = p - 1
    end do
    if (p < 1) return
    q = size(perm)
    do while (perm(q) <= perm(p))
      q = q - 1
    end do
    t = perm(p); perm(p) = perm(q); perm(q) = t
    perm(p + 1:) = perm(size(perm):p + 1:-1)
    next_permutation = .true.
  end function next_permutation

  include 'caf_check.inc'

end program caf_coll
