! caf_alloc_mismatch.f90 -- an ALLOCATE of a coarray with a different
! size on every image (not conforming: the bounds must agree).  Each image
! would place the next coarrays differently; the library must notice at
! the ALLOCATE, say so on the images that see it, naming the sizes, and
! end the job.
!
! EXPECT-FAIL: the images disagree on their ALLOCATE or DEALLOCATE
! EXPECT-EVERY-IMAGE (each image says so, the one that skipped it too)
! MIN-IMAGES: 2
program caf_alloc_mismatch
  implicit none
  real(8), allocatable :: x(:)[:]
  integer :: me
  me = this_image()
  allocate(x(16 * me)[*])
  x = me
  sync all
  ! An image that skipped the statement is one SYNC ALL ahead: it waits
  ! here until the job ends (it does not print FAIL when the others see).
  sync all
  print '(a,i0,a)', 'FAIL caf_alloc_mismatch image ', me, &
       ': ALLOCATE with different sizes went unnoticed'
  error stop 1
end program caf_alloc_mismatch
