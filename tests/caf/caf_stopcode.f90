! caf_stopcode.f90 -- a STOP code is the image's exit status, as in a
! serial gfortran program: image 1 executes "stop 3" after every image
! checked in, the others a plain "stop"; the job must exit with status 3
! (the launcher reports the first non-zero image status) and every image
! must still stop normally (no abort, the others finish).
!
! EXIT-STATUS: 3
!
! Prints "PASS caf_stopcode" on image 1 before it stops.  Any image count.
program caf_stopcode
  implicit none
  integer :: seen[*]
  seen = 0
  sync all
  critical
    seen[1] = seen[1] + 1
  end critical
  sync all
  if (this_image() == 1) then
    if (seen /= num_images()) then
      print '(a,i0,a,i0)', 'FAIL caf_stopcode image 1: ', seen, ' check-ins of ', num_images()
      error stop 1
    end if
    print '(a)', 'PASS caf_stopcode'
    stop 3
  end if
  stop
end program caf_stopcode
