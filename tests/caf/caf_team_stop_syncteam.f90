! caf_team_stop_syncteam.f90 -- SYNC TEAM of a team whose member stopped
! right after FORM TEAM, before it ever entered the team.
!
! gfortran 12 accepts no STAT= in SYNC TEAM, so the error condition (a
! member has stopped, Fortran 2018 11.6.11) is an error termination: the
! job must end with a nonzero status and "SYNC TEAM: an image of the team
! has stopped", never hang.  The stopped image knows the team from its
! FORM TEAM and answers the team's barrier.  A first SYNC TEAM with every
! member running must succeed (else image 1 would not get to the second).
!
! MIN-IMAGES: 2
! EXPECT-FAIL: SYNC TEAM: an image of the team has stopped
program caf_team_stop_syncteam
  use iso_fortran_env, only: team_type
  implicit none
  type(team_type) :: tm
  form team (1, tm)
  sync team (tm)
  if (this_image() == num_images()) stop
  sync team (tm)
  write (*, '(a, i0, a)') 'FAIL caf_team_stop_syncteam image ', this_image(), &
      ': sync team returned'
end program caf_team_stop_syncteam
