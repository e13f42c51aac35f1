! caf_derived.f90 -- derived types as coarrays.
!
! Checks:
!  * a derived-type scalar coarray with plain components: component puts
!    (p[j]%i = ...), component section gets (y = p[j]%r(2:5)), whole
!    derived-type put and get;
!  * an array of derived type: parr(3)[j]%c, parr(:)[j]%i (strided gets
!    of one component across the array), parr(2)[j]%r(4) = ...;
!  * a derived type with ALLOCATABLE components, allocated with a
!    different size on each image (and re-allocated with another size):
!    remote reads d[j]%a(:) and d[j]%a(2:3) (caf_get_by_ref), remote writes
!    d[j]%a(3) = ... (caf_send_by_ref), image-to-image d[j]%a(1:2) =
!    d[k]%s(2:3) (caf_sendget_by_ref) and allocated(d[j]%a) (caf_is_present);
!  * an allocatable array on the left-hand side of a coindexed get
!    (u = a(:)[j], 1-D and 2-D), which gfortran 12 compiles to caf_get_by_ref.
!
! OpenCoarrays 2.10.1 fails (on any image count, even one):
!  * parr(:)[j]%i returns wrong values: gfortran describes the remote
!    side with elem_len=4 but span=64 (the size of plain_t), and the
!    library has to step by span;
!  * the 2-D allocatable left-hand side gets (u2 = b2(:,:)[j],
!    u2 = b2(3:1:-2,2:3)[j]) return wrong values.
!
! Prints "PASS caf_derived" on image 1 on success; otherwise
! "FAIL caf_derived image <i>: ..." and error stop 1.  Any image count.
program caf_derived
  implicit none
  character(*), parameter :: test_name = 'caf_derived'
  type :: plain_t
    integer :: i = 0
    real(8) :: r(6) = 0
    character(len=4) :: c = '    '
  end type plain_t
  type :: dyn_t
    integer :: tag = 0
    integer, allocatable :: a(:)
    real(8), allocatable :: m(:, :)
    integer, allocatable :: s(:)
  end type dyn_t
  type(plain_t) :: p[*], parr(4)[*], lp
  type(dyn_t) :: d[*]
  integer :: a(10)[*], b2(3, 4)[*]
  integer, allocatable :: u(:), u2(:, :), got(:)
  real(8) :: y(4)
  integer :: me, n, left, right, left2, i, k, iter, ri(4)
  character(len=4) :: cc
  logical :: is_alloc

  me = this_image()
  n = num_images()
  left = modulo(me - 2, n) + 1
  right = modulo(me, n) + 1
  left2 = modulo(me - 3, n) + 1

  ! ---- plain components ----------------------------------------------
  p%i = me
  p%r = [(me + 0.25d0 * k, k = 1, 6)]
  p%c = 'im' // achar(48 + mod(me, 10)) // '!'
  do k = 1, 4
    parr(k)%i = 100 * me + k
    parr(k)%r = [(me * 10 + k + 0.5d0 * i, i = 1, 6)]
    parr(k)%c = achar(64 + k) // achar(96 + mod(me, 26)) // 'xy'
  end do
  sync all
  y = p[right]%r(2:5)
  call check(all(y == [(right + 0.25d0 * k, k = 2, 5)]), 'get p[j]%r(2:5)')
  call check(p[left]%i == left, 'get p[j]%i')
  cc = parr(3)[right]%c
  call check(cc == 'C' // achar(96 + mod(right, 26)) // 'xy', 'get parr(3)[j]%c')
  ri = parr(:)[left]%i
  call check(all(ri == [(100 * left + k, k = 1, 4)]), 'get parr(:)[j]%i (strided component)')
  lp = parr(2)[right]
  call check(lp%i == 100 * right + 2 .and. lp%r(6) == right * 10 + 2 + 3d0, 'get whole parr(2)[j]')
  sync all
  p[right]%i = -me
  p[right]%r(1:6:5) = [-1d0, -6d0] * me
  parr(2)[right]%r(4) = 1234.5d0 + me
  cc = 'zzz' // achar(48 + mod(me, 10))   ! a named variable: see caf_types
  parr(4)[right]%c = cc
  lp%i = 77 * me
  lp%r = 3.5d0
  lp%c = 'whol'
  parr(1)[right] = lp
  sync all
  call check(p%i == -left, 'put p[j]%i')
  call check(all(p%r == [-1d0 * left, (me + 0.25d0 * k, k = 2, 5), -6d0 * left]), 'put p[j]%r(1:6:5)')
  call check(parr(2)%r(4) == 1234.5d0 + left, 'put parr(2)[j]%r(4)')
  call check(all(parr(2)%r([1, 2, 3, 5, 6]) == [(me * 10 + 2 + 0.5d0 * i, i = 1, 3), (me * 10 + 2 + 0.5d0 * i, i = 5, 6)]), &
             'neighbours of parr(2)%r(4) untouched')
  call check(parr(4)%c == 'zzz' // achar(48 + mod(left, 10)), 'put parr(4)[j]%c')
  call check(parr(1)%i == 77 * left .and. all(parr(1)%r == 3.5d0) .and. parr(1)%c == 'whol', 'put whole parr(1)[j]')
  sync all

  ! ---- allocatable components --------------------------------------------
  do iter = 1, 3
    allocate(d%a(me + iter + 1))
    d%a = [(1000 * me + 10 * iter + k, k = 1, me + iter + 1)]
    d%tag = me * iter
    allocate(d%s(3 + me))
    d%s = [(-7 * me - 100 * iter - k, k = 1, 3 + me)]
    if (mod(me, 2) == 0 .or. iter == 2) then
      allocate(d%m(2, me))
      d%m = me + iter
    end if
    sync all
    got = d[right]%a(:)
    call check(size(got) == right + iter + 1, 'size of d[j]%a(:)')
    call check(all(got == [(1000 * right + 10 * iter + k, k = 1, right + iter + 1)]), 'get d[j]%a(:)')
    got = d[left]%a(2:3)
    call check(all(got == [1000 * left + 10 * iter + 2, 1000 * left + 10 * iter + 3]), 'get d[j]%a(2:3)')
    call check(d[right]%tag == right * iter, 'get d[j]%tag')
    is_alloc = allocated(d[right]%m)
    call check(is_alloc .eqv. (mod(right, 2) == 0 .or. iter == 2), 'allocated(d[j]%m)')
    call check(allocated(d[left]%a), 'allocated(d[j]%a)')
    if (is_alloc) then
      call check(all(d[right]%m(2, :) == right + iter), 'get d[j]%m(2,:)')
    end if
    sync all
    d[right]%a(3) = -me - iter
    d[right]%tag = -me
    sync all
    call check(d%a(3) == -left - iter, 'put d[j]%a(3)')
    call check(d%a(2) == 1000 * me + 10 * iter + 2 .and. d%a(1) == 1000 * me + 10 * iter + 1, &
               'put d[j]%a(3) left other elements alone')
    call check(d%tag == -left, 'put d[j]%tag')
    sync all
    d[right]%a(1:2) = d[left]%s(2:3)
    sync all
    call check(all(d%a(1:2) == [-7 * left2 - 100 * iter - 2, -7 * left2 - 100 * iter - 3]), &
               'sendget d[j]%a(1:2) = d[k]%s(2:3)')
    sync all
    deallocate(d%a, d%s)
    if (allocated(d%m)) deallocate(d%m)
  end do
  sync all

  ! ---- allocatable left-hand side of a coindexed get -------------------
  a = [(me * 50 + k, k = 1, 10)]
  b2 = reshape([(me * 100 + k, k = 1, 12)], [3, 4])
  sync all
  u = a(:)[right]
  call check(allocated(u) .and. size(u) == 10, 'u = a(:)[j] allocates u')
  call check(all(u == [(right * 50 + k, k = 1, 10)]), 'u = a(:)[j] values')
  u = a(2:10:4)[left]
  call check(size(u) == 3, 'u = a(2:10:4)[j] reallocates u to 3')
  call check(all(u == [left * 50 + 2, left * 50 + 6, left * 50 + 10]), 'u = a(2:10:4)[j] values')
  u2 = b2(:, :)[right]
  call check(all(shape(u2) == [3, 4]), 'u2 = b2(:,:)[j] shape')
  call check(all(u2 == reshape([(right * 100 + k, k = 1, 12)], [3, 4])), 'u2 = b2(:,:)[j] values')
  u2 = b2(3:1:-2, 2:3)[left]
  call check(all(shape(u2) == [2, 2]), 'u2 = b2(3:1:-2,2:3)[j] shape')
  call check(all(u2 == reshape([left * 100 + 6, left * 100 + 4, left * 100 + 9, left * 100 + 7], [2, 2])), &
             'u2 = b2(3:1:-2,2:3)[j] values')

  sync all
  if (me == 1) write(*, '(a)') 'PASS caf_derived'

contains

  include 'caf_check.inc'

end program caf_derived
