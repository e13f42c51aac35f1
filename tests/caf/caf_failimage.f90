! caf_failimage.f90 -- FAIL IMAGE and the failed-image inquiries.
!
! The last image (needs >= 2 images) executes FAIL IMAGE.  The others then
! get STAT_FAILED_IMAGE from sync all(stat=), image_status(last) =
! STAT_FAILED_IMAGE and failed_images() = [last]; they keep working and
! image 1 prints PASS.  The exit status of the run after a failed image is
! processor dependent, so the driver only requires the PASS line.  On one
! image FAIL IMAGE is not executed (the program would just end).
!
! OpenCoarrays 2.10.1 (Debian build, no failed-images support): on >= 2
! images the run is killed (exit 137) once the image fails; 1 image passes.
!
! Prints "PASS caf_failimage" on image 1 on success; otherwise
! "FAIL caf_failimage image <i>: ..." and error stop 1.
program caf_failimage
  use iso_fortran_env, only: stat_failed_image
  implicit none
  character(*), parameter :: test_name = 'caf_failimage'
  integer, allocatable :: list(:)
  integer :: me, n, st

  me = this_image()
  n = num_images()
  sync all
  if (n >= 2) then
    if (me == n) fail image
    sync all (stat=st)
    call check(st == stat_failed_image, 'sync all stat= after an image failed is STAT_FAILED_IMAGE')
    call check(image_status(n) == stat_failed_image, 'image_status of the failed image')
    list = failed_images()
    call check(size(list) == 1, 'failed_images() has one entry')
    call check(list(1) == n, 'failed_images() names the failed image')
    sync all (stat=st)
  end if
  if (me == 1) write(*, '(a)') 'PASS caf_failimage'

contains

  include 'caf_check.inc'

end program caf_failimage
