! caf_ref_components: coindexed references through components of coarrays
! of derived type (gfortran -fcoarray=lib compiles them to get_by_ref /
! send_by_ref when the type has an allocatable component): scalar and array
! components, nested types, arrays of derived type, sections with negative
! strides, kind conversion, and this image as the target.
! Checked against the local (non-coindexed) expressions: OpenCoarrays 2.10
! (caf.openmpi) gets y(:)[p]%i, y(4:0:-2)[p]%i and y(2)[p]%n(:)%d wrong
! (wrong elements, garbage) and stops at x[p]%r(10:2:-4) = ... ("extent out
! of range" / "unable to allocate memory on remote image").
program caf_ref_components
  implicit none
  type inner
    integer :: b(-2:5)
    real(8) :: d
    integer, allocatable :: unused(:)
  end type
  type t
    integer :: i
    real :: r(10)
    type(inner) :: n(3)
    integer, allocatable :: a(:)
  end type
  type(t) :: x[*]
  type(t) :: y(0:4)[*]
  integer :: me, np, p, k, j, m, v(10), w(5)
  real(8) :: d3(3)
  integer(8) :: i8
  logical :: ok

  me = this_image()
  np = num_images()
  p = mod(me, np) + 1            ! right neighbour (myself on 1 image)
  ok = .true.

  x%i = 100 * me
  x%r = [(real(10 * me + k), k = 1, 10)]
  do j = 0, 4
    y(j)%i = 1000 * me + j
    y(j)%r = [(real(1000 * me + 10 * j + k), k = 1, 10)]
    do k = 1, 3
      y(j)%n(k)%b = [(10000 * me + 100 * j + 10 * k + m, m = -2, 5)]
      y(j)%n(k)%d = me + j / 10.0d0 + k / 100.0d0
    end do
  end do
  sync all

  ! scalar component
  k = x[p]%i
  call check(k == 100 * p, 'scalar component')
  ! array component, section with stride, kind conversion (real -> real(8))
  d3 = x[p]%r(1:5:2)
  call check(all(d3 == [10 * p + 1, 10 * p + 3, 10 * p + 5]), 'real section -> real(8)')
  ! negative stride
  v(1:4) = int(x[p]%r(9:3:-2))
  call check(all(v(1:4) == [10 * p + 9, 10 * p + 7, 10 * p + 5, 10 * p + 3]), 'negative stride')
  ! element of an array of derived type, then a component
  k = y(3)[p]%i
  call check(k == 1000 * p + 3, 'y(3)[p]%i')
  ! section of an array of derived type, component of each
  w = y(:)[p]%i
  call check(all(w == [(1000 * p + j, j = 0, 4)]), 'y(:)[p]%i')
  w(1:3) = y(4:0:-2)[p]%i
  call check(all(w(1:3) == [1000 * p + 4, 1000 * p + 2, 1000 * p]), 'y(4:0:-2)[p]%i')
  ! nested types with non-default lower bounds
  k = y(1)[p]%n(2)%b(-1)
  call check(k == 10000 * p + 100 + 20 - 1, 'nested element')
  v(1:3) = y(1)[p]%n(2)%b(0:-2:-1)
  call check(all(v(1:3) == [10000 * p + 120, 10000 * p + 119, 10000 * p + 118]), 'nested negative stride')
  v(1:5) = y(:)[p]%n(3)%b(4)
  call check(all(v(1:5) == [(10000 * p + 100 * j + 34, j = 0, 4)]), 'y(:)[p]%n(3)%b(4)')
  d3 = y(2)[p]%n(:)%d
  call check(all(abs(d3 - [(p + 0.2d0 + k / 100.0d0, k = 1, 3)]) < 1d-12), 'nested real(8) component')
  ! integer(8) from integer
  i8 = y(4)[p]%n(1)%b(5)
  call check(i8 == 10000_8 * p + 400 + 10 + 5, 'integer -> integer(8)')
  sync all

  ! writes: to the right neighbour
  x[p]%i = -me
  x[p]%r(10:2:-4) = [1.5, 2.5, 3.5]
  y(1:3)[p]%n(2)%b(3) = [7 * me, 8 * me, 9 * me]
  y(4)[p]%n(1)%b(-2:0) = int(me, 8)       ! scalar broadcast, kind conversion
  y(0)[p]%n(3)%d = 2                      ! integer -> real(8)
  sync all
  j = mod(me - 2 + np, np) + 1            ! left neighbour wrote to me
  call check(x%i == -j, 'write scalar')
  call check(x%r(10) == 1.5 .and. x%r(6) == 2.5 .and. x%r(2) == 3.5 .and. x%r(9) == 10 * me + 9, &
       'write negative stride')
  call check(all(y(1:3)%n(2)%b(3) == [7 * j, 8 * j, 9 * j]), 'write component of section')
  call check(all(y(4)%n(1)%b(-2:0) == j) .and. y(4)%n(1)%b(1) == 10000 * me + 400 + 11, 'write broadcast')
  call check(y(0)%n(3)%d == 2.0d0, 'write int -> real(8)')
  sync all

  ! this image as the target
  x[me]%i = 42
  k = x[me]%i
  call check(k == 42 .and. x%i == 42, 'local image')
  v(1:3) = y(2)[me]%n(1)%b(1:3)
  call check(all(v(1:3) == y(2)%n(1)%b(1:3)), 'local image section')

  sync all
  if (.not. ok) error stop 1
  if (me == 1) write (*, '(a)') 'PASS caf_ref_components'
contains
  subroutine check(cond, what)
    logical, intent(in) :: cond
    character(*), intent(in) :: what
    if (.not. cond) then
      write (*, '(a,i0,2a)') 'FAIL image ', me, ': ', what
      ok = .false.
    end if
  end subroutine
end program
