! caf_coll_order.f90 -- CO_REDUCE of arrays with an associative but NOT
! commutative operation gets "A1 op A2 op ... op An", in image order, for
! every element, on every path.
!
! The operation composes affine maps t -> a*t + b (x op y = x(y(t))):
! associative, not commutative, exact in integer(8).  Image i's element k
! is (1 + mod(i + k, 3), mod(31 i + k, 97)); every image computes the
! expected composition itself.  Sizes: 1 element (the small path), 700
! (11 KiB: reduce-scattered on the node path, where each image folds its
! own part from its buffer and the others' from their slots; reduce-scatter
! + allgather on the message path), 70000 (1.1 MB: two node chunks, five
! message chunks); for all images and for each RESULT_IMAGE in turn.
! ALSO-ENV: FH_SHM=off
! (runs also with it: the message path; as is, on one machine, the node path)
! Prints "PASS caf_coll_order" on image 1; otherwise "FAIL caf_coll_order
! image <i>: ..." and error stop 1.  Any image count.
module caf_coll_order_ops
  implicit none
  type :: aff_t
    integer(8) :: a, b
  end type aff_t
contains
  pure function compose(x, y) result(z)
    type(aff_t), intent(in) :: x, y
    type(aff_t) :: z
    z%a = x%a * y%a
    z%b = x%a * y%b + x%b
  end function compose

  pure function elem(i, k) result(v)
    integer, intent(in) :: i, k
    type(aff_t) :: v
    v%a = 1 + mod(i + k, 3)
    v%b = mod(31 * i + k, 97)
  end function elem
end module caf_coll_order_ops

program caf_coll_order
  use caf_coll_order_ops
  implicit none
  integer, parameter :: sizes(3) = [1, 700, 70000]
  type(aff_t), allocatable :: v(:), want(:)
  integer :: me, n, s, k, j, root, m, st, bad

  me = this_image()
  n = num_images()
  do s = 1, size(sizes)
    m = sizes(s)
    allocate (v(m), want(m))
    do k = 1, m
      want(k) = elem(1, k)
      do j = 2, n
        want(k) = compose(want(k), elem(j, k))
      end do
    end do
    do root = 0, n
      do k = 1, m
        v(k) = elem(me, k)
      end do
      if (root == 0) then
        call co_reduce(v, compose, stat=st)
      else
        call co_reduce(v, compose, result_image=root, stat=st)
      end if
      if (st /= 0) call fail('stat', m, root, 0)
      if (root == 0 .or. root == me) then
        bad = 0
        do k = 1, m
          if (v(k)%a /= want(k)%a .or. v(k)%b /= want(k)%b) then
            bad = k
            exit
          end if
        end do
        if (bad /= 0) call fail('not A1 op A2 op ... op An', m, root, bad)
      end if
    end do
    deallocate (v, want)
  end do
  sync all
  if (me == 1) write (*, '(a)') 'PASS caf_coll_order'

contains

  subroutine fail(what, m, root, k)
    character(len=*), intent(in) :: what
    integer, intent(in) :: m, root, k
    write (*, '(a,i0,a,a,a,i0,a,i0,a,i0)') 'FAIL caf_coll_order image ', me, &
      ': ', what, ': elements ', m, ', result_image ', root, ', element ', k
    error stop 1
  end subroutine fail
end program caf_coll_order
