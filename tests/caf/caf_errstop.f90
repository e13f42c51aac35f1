! caf_errstop.f90 -- ERROR STOP on a non-first image ends every image.
!
! The last image (image 2 or higher) executes "error stop 7" after a
! short delay while all the other images wait in SYNC ALL.  Every image
! must end and the launcher must exit with a nonzero status; the driver
! checks that status and that the run ends within its timeout.  The line
! "EXPECTED-ERROR-STOP caf_errstop" is printed by the stopping image just
! before; "FAIL caf_errstop ..." is printed (exit status 1) if SYNC ALL
! returns to any image instead.
! Also covers ERROR STOP with a character stop code (on one image, where
! the numeric code cannot be exercised on a non-first image).
!
! Expected outcome: exit status /= 0, no PASS line.
program caf_errstop
  implicit none
  integer :: me, n, i
  real(8) :: spin

  me = this_image()
  n = num_images()
  sync all
  if (n == 1) then
    write(*, '(a)') 'EXPECTED-ERROR-STOP caf_errstop'
    error stop 'caf_errstop: error stop with a string on one image'
  end if
  if (me == n) then
    spin = 0
    do i = 1, 2000000                 ! let the others reach sync all
      spin = spin + sqrt(real(i, 8))
    end do
    if (spin < 0) print *, spin
    write(*, '(a,i0)') 'EXPECTED-ERROR-STOP caf_errstop image ', me
    error stop 7
  end if
  sync all
  write(*, '(a,i0,a)') 'FAIL caf_errstop image ', me, ': sync all returned although an image did error stop'
  error stop 1
end program caf_errstop
