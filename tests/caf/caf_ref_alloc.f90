! caf_ref_alloc: allocatable components of coarrays of derived type, of a
! different size on every image, read and written from other images
! (get_by_ref / send_by_ref follow the remote descriptor), an allocatable
! left-hand side reallocated to the remote shape, vector subscripts,
! image-to-image assignment (sendget_by_ref), kind conversion, and
! ALLOCATED of a remote component (is_present).
! OpenCoarrays 2.10 (caf.openmpi) passes every read here on 2..4 images,
! and stops at the first write into an allocated remote component
! (send_by_ref: "unable to allocate memory on remote image").
program caf_ref_alloc
  implicit none
  type box
    integer, allocatable :: c(:,:)
  end type
  type t
    integer :: tag
    integer, allocatable :: a(:)
    real(8), allocatable :: s
    type(box), allocatable :: q
    integer, allocatable :: never(:)
  end type
  type(t) :: x[*]
  type(t) :: y(3)[*]
  integer, allocatable :: ac(:)[:]
  integer, allocatable :: u(:), u2(:,:)
  real, allocatable :: ur(:)
  integer :: me, np, p, lft, k, j, n, v(8), m(2,2)
  integer(2) :: ix(3)
  real(8) :: r8
  logical :: ok, l

  me = this_image()
  np = num_images()
  p = mod(me, np) + 1
  lft = mod(me - 2 + np, np) + 1
  ok = .true.

  ! a(:) has 3 + image index elements, lower bound -1 on even images
  n = 3 + me
  if (mod(me, 2) == 0) then
    allocate(x%a(-1:n - 2))
  else
    allocate(x%a(n))
  end if
  x%a = [(100 * me + k, k = 1, n)]
  x%tag = me
  allocate(x%s)
  x%s = me + 0.5d0
  allocate(x%q)
  allocate(x%q%c(2, me + 1))
  x%q%c = reshape([(10 * me + k, k = 1, 2 * (me + 1))], [2, me + 1])
  do j = 1, 3
    allocate(y(j)%a(j * me))
    y(j)%a = [(1000 * j + k, k = 1, j * me)]
  end do
  allocate(ac(5 + 0)[*])
  ac = [(me * 10 + k, k = 1, 5)]
  sync all

  ! whole remote allocatable component, its size is the neighbour's
  n = 3 + p
  u = x[p]%a
  call check(size(u) == n .and. lbound(u, 1) == 1, 'u = x[p]%a reallocated')
  call check(all(u == [(100 * p + k, k = 1, n)]), 'u = x[p]%a values')
  ! section of it, Fortran subscripts relative to the remote bounds
  if (mod(p, 2) == 0) then
    v(1:3) = x[p]%a(0:2)
  else
    v(1:3) = x[p]%a(2:4)
  end if
  call check(all(v(1:3) == [100 * p + 2, 100 * p + 3, 100 * p + 4]), 'section of remote component')
  ! reversed, the neighbour's bounds
  u = x[p]%a(lbound_of(p) + 3 + p - 1:lbound_of(p):-2)
  call check(size(u) == (3 + p + 1) / 2 .and. u(1) == 100 * p + 3 + p .and. u(2) == 100 * p + 1 + p, &
       'reversed remote section')
  ! allocatable LHS from an allocatable coarray: u = ac(:)[p]
  deallocate(u)
  u = ac(:)[p]
  call check(size(u) == 5 .and. all(u == [(p * 10 + k, k = 1, 5)]), 'u = ac(:)[p]')
  u = ac(5:1:-2)[p]           ! u allocated with another shape
  call check(size(u) == 3 .and. all(u == [p * 10 + 5, p * 10 + 3, p * 10 + 1]), 'u = ac(5:1:-2)[p]')
  ur = x[p]%a(lbound_of(p):lbound_of(p) + 1)   ! realloc + kind conversion
  call check(size(ur) == 2 .and. all(ur == [100 * p + 1, 100 * p + 2]), 'ur = x[p]%a(..) real')
  ! vector subscripts (integer(2) vector)
  ix = int([3, 1, 2], 2) + int(lbound_of(p) - 1, 2)
  v(1:3) = x[p]%a(ix)
  call check(all(v(1:3) == [100 * p + 3, 100 * p + 1, 100 * p + 2]), 'vector subscript')
  ! allocatable scalar component, kind conversion real(8) -> integer
  r8 = x[p]%s
  call check(r8 == p + 0.5d0, 'allocatable scalar')
  k = x[p]%s
  call check(k == p, 'allocatable scalar real(8) -> integer')
  ! allocatable derived-type component holding an allocatable array
  k = x[p]%q%c(2, p + 1)
  call check(k == 10 * p + 2 * (p + 1), 'x[p]%q%c(2,n)')
  m = x[p]%q%c(:, 1:2)
  call check(all(m == reshape([(10 * p + k, k = 1, 4)], [2, 2])), 'x[p]%q%c(:,1:2)')
  u2 = x[p]%q%c
  call check(all(shape(u2) == [2, p + 1]), 'u2 = x[p]%q%c shape')
  ! element of an array of derived type with an allocatable component
  v(1:2) = y(2)[p]%a(2 * p - 1:2 * p)
  call check(all(v(1:2) == [2000 + 2 * p - 1, 2000 + 2 * p]), 'y(2)[p]%a(..)')
  ! ALLOCATED of remote components
  l = allocated(x[p]%a)
  call check(l, 'allocated(x[p]%a)')
  l = allocated(x[p]%never)
  call check(.not. l, '.not. allocated(x[p]%never)')
  l = allocated(x[p]%s)
  call check(l, 'allocated(x[p]%s)')
  sync all

  ! writes into the neighbour's allocatable components
  x[p]%a(lbound_of(p)) = -me
  x[p]%a(lbound_of(p) + 1:lbound_of(p) + 2) = [-2 * me, -3 * me]
  x[p]%s = me * 2            ! integer -> real(8)
  x[p]%q%c(1, :) = 7 * me    ! broadcast into a row of the neighbour's size
  y(3)[p]%a(int([3, 1], 8)) = int([55, 66], 8)   ! vector subscript, kind conversion
  sync all
  call check(x%a(lbound(x%a, 1)) == -lft .and. x%a(lbound(x%a, 1) + 2) == -3 * lft, 'write remote component')
  call check(x%a(ubound(x%a, 1)) == 100 * me + 3 + me, 'write left the rest')
  call check(x%s == 2 * lft, 'write allocatable scalar')
  call check(all(x%q%c(1, :) == 7 * lft) .and. all(x%q%c(2, :) == [(10 * me + 2 * k, k = 1, me + 1)]), &
       'write row of remote q%c')
  call check(y(3)%a(3) == 55 .and. y(3)%a(1) == 66, 'write vector subscript')
  sync all

  ! image to image: x[me]%a(..) = y(1)[p]%a(:) (sendget_by_ref)
  x[me]%a(lbound(x%a, 1):lbound(x%a, 1) + p - 1) = y(1)[p]%a(:)
  call check(all(x%a(lbound(x%a, 1):lbound(x%a, 1) + p - 1) == [(1000 + k, k = 1, p)]), 'sendget to me')
  sync all
  x[p]%a(lbound_of(p):lbound_of(p) + 1) = y(2)[lft]%a(2:1:-1)
  sync all
  call check(x%a(lbound(x%a, 1)) == 2002 .and. x%a(lbound(x%a, 1) + 1) == 2001, 'sendget between images')
  sync all
  if (.not. ok) error stop 1
  if (me == 1) write (*, '(a)') 'PASS caf_ref_alloc'
contains
  integer function lbound_of(img)
    integer, intent(in) :: img
    lbound_of = merge(-1, 1, mod(img, 2) == 0)
  end function
  subroutine check(cond, what)
    logical, intent(in) :: cond
    character(*), intent(in) :: what
    if (.not. cond) then
      write (*, '(a,i0,2a)') 'FAIL image ', me, ': ', what
      ok = .false.
    end if
  end subroutine
end program
