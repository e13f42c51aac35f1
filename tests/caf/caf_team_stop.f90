! caf_team_stop.f90 -- SYNC ALL and a collective inside a child team
! (FORM TEAM / CHANGE TEAM) after a member of the team has stopped.
!
! The images split into teams (one team on 2 images; odd and even images
! on 3 or more).  In each team of two or more, the last member executes
! STOP inside CHANGE TEAM, after one SYNC ALL with every member; the others
! then get STAT_STOPPED_IMAGE (Fortran 2018 11.6.11) from:
!   * sync all(stat=) of the team, twice (the stopped image answers each
!     barrier of the team, not only the first);
!   * co_sum(stat=) over the team;
! and image_status() of it is STAT_STOPPED_IMAGE.  A team of one member
! (image 2 of 3) sees stat 0.  Before the stop every team SYNC ALL gives 0.
! In a team of three or more, member 1 skips the SYNC ALLs: the others'
! must not pair with its END TEAM.  END TEAM synchronizes the active
! images (a stopped member is no error, F2018 11.1.5.2); after it the
! initial team's sync all(stat=) and co_sum(stat=) give
! STAT_STOPPED_IMAGE.  Image 1 prints "PASS caf_team_stop"; a failed check is
! "FAIL caf_team_stop image <i>: ..." and error stop 1.  A hang (the
! stopped image did not answer the team's barrier) is the test's timeout.
!
! MIN-IMAGES: 2
! ALSO-ENV: FH_SHM=off
program caf_team_stop
  use iso_fortran_env, only: team_type, stat_stopped_image
  implicit none
  type(team_type) :: tm
  integer :: me, n, tnum, tme, tn, st, x
  character(len=80) :: msg

  me = this_image()
  n = num_images()
  tnum = 1
  if (n >= 3) tnum = 2 - mod(me, 2)
  form team (tnum, tm)
  change team (tm)
    tme = this_image()
    tn = num_images()
    st = -1
    sync all (stat=st)
    call check(st, 0, 'sync all (stat=) before the stop')
    if (tn >= 2 .and. tme == tn) stop
    x = tme
    call co_sum(x, stat=st)
    call check(st, merge(stat_stopped_image, 0, tn >= 2), 'co_sum(stat=)')
    if (tn >= 2) call check(image_status(tn), stat_stopped_image, 'image_status(last)')
    ! In a team of three or more, member 1 goes straight to END TEAM while
    ! the other running members execute SYNC ALL first: their SYNC ALLs
    ! must not pair with its END TEAM.
    if (tme > 1 .or. tn <= 2) then
      msg = ''
      sync all (stat=st, errmsg=msg)
      call check(st, merge(stat_stopped_image, 0, tn >= 2), 'sync all (stat=) after the stop')
      if (tn >= 2 .and. index(msg, 'stopped') == 0) &
          call fail('errmsg of sync all: "' // trim(msg) // '"')
      sync all (stat=st)
      call check(st, merge(stat_stopped_image, 0, tn >= 2), 'a second sync all (stat=)')
    end if
  end team
  ! END TEAM synchronized the active images; the initial team has a
  ! stopped image whenever some team of two or more had one
  st = -1
  sync all (stat=st)
  call check(st, merge(stat_stopped_image, 0, n >= 2), 'sync all (stat=) after end team')
  x = me
  call co_sum(x, stat=st)
  call check(st, merge(stat_stopped_image, 0, n >= 2), 'co_sum(stat=) after end team')
  if (me == 1) write (*, '(a)') 'PASS caf_team_stop'
contains
  subroutine check(got, want, what)
    integer, intent(in) :: got, want
    character(len=*), intent(in) :: what
    character(len=120) :: line
    if (got /= want) then
      write (line, '(a, i0, a, i0)') ': got ', got, ', want ', want
      call fail(what // trim(line))
    end if
  end subroutine
  subroutine fail(what)
    character(len=*), intent(in) :: what
    write (*, '(a, i0, a)') 'FAIL caf_team_stop image ', me, ': ' // what
    error stop 1
  end subroutine
end program caf_team_stop
