! caf_ref_unalloc: a coindexed read through an allocatable component that
! is not allocated on the target image, without STAT=: error termination
! with a message naming the image ("... of image J is not allocated"),
! never a crash.  EXPECT-FAIL: is not allocated
! (tests/caf/run_caf_ref.sh checks the exit status and the message.)
program caf_ref_unalloc
  implicit none
  type t
    integer, allocatable :: a(:)
  end type
  type(t) :: x[*]
  integer :: v(2)

  sync all
  if (this_image() == 1) then
    v = x[num_images()]%a(1:2)
    write (*, '(a,2i6)') 'FAIL caf_ref_unalloc: read an unallocated component:', v
    error stop 1
  end if
  sync all
  write (*, '(a)') 'FAIL caf_ref_unalloc: no error'
end program
