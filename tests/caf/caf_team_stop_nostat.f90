! caf_team_stop_nostat.f90 -- SYNC ALL without STAT= inside a child team
! whose member has stopped: an error termination (Fortran 2018 11.6.11:
! an error condition of an image control statement without STAT=), with
! the library's message, never a hang.
!
! All images form one team; inside it the last image executes STOP and
! the others execute SYNC ALL: the job must end with a nonzero status and
! "SYNC ALL: an image has stopped".  (Were SYNC ALL to return, image 1
! would print a FAIL line.)
!
! MIN-IMAGES: 2
! EXPECT-FAIL: SYNC ALL: an image has stopped
program caf_team_stop_nostat
  use iso_fortran_env, only: team_type
  implicit none
  type(team_type) :: tm
  form team (1, tm)
  change team (tm)
    if (this_image() == num_images()) stop
    sync all
    write (*, '(a, i0, a)') 'FAIL caf_team_stop_nostat image ', this_image(), &
        ': sync all returned'
  end team
end program caf_team_stop_nostat
