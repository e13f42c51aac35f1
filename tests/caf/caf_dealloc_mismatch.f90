! caf_dealloc_mismatch.f90 -- images that execute different DEALLOCATE
! statements of coarrays: image 2 skips the DEALLOCATE of a (it goes on to
! SYNC ALL), and on 3 or more images the last image deallocates b instead.
! Left alone the heaps of the images would differ from here on and every
! later coarray would be corrupted silently; the library must notice at
! the DEALLOCATE, say so naming the coarrays, and end the job.
!
! EXPECT-FAIL: the images disagree on their ALLOCATE or DEALLOCATE
! EXPECT-EVERY-IMAGE (each image says so, the one that skipped it too)
! MIN-IMAGES: 2
program caf_dealloc_mismatch
  implicit none
  integer, allocatable :: a(:)[:], b(:)[:]
  integer :: me, n
  me = this_image()
  n = num_images()
  allocate(a(100)[*], b(300)[*])
  a = me
  b = me
  if (n >= 3 .and. me == n) then
    deallocate(b)
  else if (me /= 2) then
    deallocate(a)
  end if
  sync all
  ! An image that skipped the statement is one SYNC ALL ahead: it waits
  ! here until the job ends (it does not print FAIL when the others see).
  sync all
  print '(a,i0,a)', 'FAIL caf_dealloc_mismatch image ', me, &
       ': different DEALLOCATE statements went unnoticed'
  error stop 1
end program caf_dealloc_mismatch
