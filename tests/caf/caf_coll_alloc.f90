! caf_coll_alloc.f90 -- co_broadcast of a derived type with allocatable
! components.
!
! gfortran 12 lowers `call co_broadcast(x, s)` for such a type into one
! library call per component: the plain components as one scalar or array,
! each allocated allocatable component with a temporary descriptor whose
! span and offset it leaves unset (the library used them as a stride: a
! crash or garbage).  Checks, from every source image in turn:
!  * a scalar derived type with an allocatable rank-1 real(8) array, an
!    allocatable rank-2 integer array, an allocatable scalar and a plain
!    component, allocated with the same shape on every image (and the
!    hidden token component gfortran adds beside an allocatable scalar,
!    which it broadcasts too: type VOID, ignored);
!  * a second such object with other shapes;
! (An ARRAY of such types cannot be tested: gfortran 12 loops over the
! elements of a descriptor it never initializes.)
!  * a component of 300000 real(8) (2.4 MB: several chunks of the node
!    path's 1 MiB slots and of the message path's 256 KiB ones);
!  * on 2 images, a component that is not allocated on the receiving image
!    with stat=: the receiver gets a nonzero stat (gfortran 12 gives the
!    library no way to allocate it), the source 0, and the next collective
!    works.
! OpenCoarrays 2.10.1: the allocated cases pass; the unallocated receiver
! crashes (SIGSEGV).
!
! ALSO-ENV: FH_SHM=off
! (runs also with it: the message path; as is, on one machine, the node path)
! Prints "PASS caf_coll_alloc" on image 1; otherwise "FAIL caf_coll_alloc
! image <i>: ..." and error stop 1.  Any image count.
module caf_coll_alloc_types
  implicit none
  type :: box_t
    integer :: tag = 0
    real(8), allocatable :: v(:)
    integer, allocatable :: m(:, :)
    integer(8), allocatable :: s
  end type box_t
  type :: big_t
    real(8), allocatable :: w(:)
  end type big_t
end module caf_coll_alloc_types

program caf_coll_alloc
  use caf_coll_alloc_types
  implicit none
  integer, parameter :: nbig = 300000
  type(box_t) :: b, b2
  type(big_t) :: g
  integer :: me, n, src, i, st, errs
  integer :: x

  me = this_image()
  n = num_images()
  errs = 0

  do src = 1, n
    call fill(b, me, 0)
    call bcast_box(b, src)
    call expect(b, src, 0, 'scalar box')
    ! A second object, other sizes.
    call fill(b2, me, 2)
    call bcast_box(b2, src)
    call expect(b2, src, 2, 'second box')
  end do

  allocate (g%w(nbig))
  do src = 1, n
    g%w = -1
    if (me == src) g%w = [(real(i, 8) * src, i = 1, nbig)]
    call co_broadcast(g, src)
    call check(all(g%w == [(real(i, 8) * src, i = 1, nbig)]), &
               '2.4 MB allocatable component')
  end do

  if (n == 2) then
    if (allocated(b%v)) deallocate (b%v)
    if (me == 2) allocate (b%v(4), source=7.0d0)
    st = -1
    call co_broadcast(b%v, 2, stat=st)
    if (me == 1) then
      call check(st /= 0, 'unallocated receiver: stat /= 0')
    else
      call check(st == 0, 'unallocated receiver: the source''s stat is 0')
    end if
    x = me
    call co_sum(x)
    call check(x == 3, 'co_sum after an unallocated receiver')
  end if

  call co_sum(errs)
  sync all
  if (me == 1 .and. errs == 0) write (*, '(a)') 'PASS caf_coll_alloc'
  if (errs /= 0) error stop 1

contains

  subroutine bcast_box(t, src)
    type(box_t), intent(inout) :: t
    integer, intent(in) :: src
    call co_broadcast(t, source_image=src)
  end subroutine bcast_box

  subroutine fill(t, img, k)
    type(box_t), intent(inout) :: t
    integer, intent(in) :: img, k
    integer :: i
    if (allocated(t%v)) deallocate (t%v)
    if (allocated(t%m)) deallocate (t%m)
    if (allocated(t%s)) deallocate (t%s)
    allocate (t%v(5 + k), t%m(3, 2 + k), t%s)
    t%tag = 100 * img + k
    t%v = [(real(i + 10 * img + 100 * k, 8), i = 1, 5 + k)]
    t%m = reshape([(i * img + k, i = 1, 3 * (2 + k))], [3, 2 + k])
    t%s = 1000_8 * img + k
  end subroutine fill

  subroutine expect(t, img, k, what)
    type(box_t), intent(in) :: t
    integer, intent(in) :: img, k
    character(*), intent(in) :: what
    integer :: i
    call check(t%tag == 100 * img + k, what // ': plain component')
    call check(all(t%v == [(real(i + 10 * img + 100 * k, 8), i = 1, 5 + k)]), &
               what // ': real(8) array component')
    call check(all(t%m == reshape([(i * img + k, i = 1, 3 * (2 + k))], [3, 2 + k])), &
               what // ': rank-2 integer component')
    call check(t%s == 1000_8 * img + k, what // ': allocatable scalar component')
  end subroutine expect

  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(*), intent(in) :: what
    if (.not. ok) then
      errs = errs + 1
      write (*, '(a,i0,a)') 'FAIL caf_coll_alloc image ', this_image(), ': ' // what
    end if
  end subroutine check
end program caf_coll_alloc
