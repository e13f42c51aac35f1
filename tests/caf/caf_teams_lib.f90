! FORM TEAM by parity, CHANGE TEAM, this_image/num_images inside,
! coindexed access with team image indices, SYNC ALL / SYNC TEAM inside,
! TEAM_NUMBER, a nested team, and the ALLOCATE-inside refusal.
program caf_teams_lib
  use iso_fortran_env
  implicit none
  type(team_type) :: parity, halves, again
  integer :: x[*], y[*]
  integer :: me, n, tn, ti, tnum, i, k, expect, st
  integer, allocatable :: z(:)[:]
  character(len=100) :: msg
  me = this_image(); n = num_images()
  x = 0; y = 0
  if (team_number() /= -1) call fail('initial team_number', team_number())
  tn = 2 - mod(me, 2)                 ! odd images: team 1, even: team 2
  form team(tn, parity)
  if (team_number(parity) /= tn) call fail('team_number(t)', team_number(parity))
  change team(parity)
    ti = this_image(); tnum = num_images()
    if (team_number() /= tn) call fail('team_number()', team_number())
    ! image i of the parity team is initial image 2*i-1 (odd) or 2*i (even)
    if (ti /= (me + 1) / 2) call fail('this_image in team', ti)
    if (tnum /= merge((n + 1) / 2, n / 2, tn == 1)) call fail('num_images in team', tnum)
    ! each image writes its initial index into the next team member
    x[1 + mod(ti, tnum)] = me
    sync all
    expect = 2 * (1 + mod(ti - 2 + tnum, tnum)) - mod(tn, 2)
    if (x /= expect) call fail('coindexed put in team', x)
    ! coindexed get: sum of the team's initial indices
    k = 0
    do i = 1, tnum
      k = k + x[i]
    end do
    sync team(parity)
    if (k /= sum([(2*i - mod(tn, 2), i = 1, tnum)])) call fail('coindexed get in team', k)
    ! nested: split the parity team into halves
    form team(1 + (ti - 1) / max(1, (tnum + 1) / 2), halves)
    change team(halves)
      y[1] = 0
      sync all
      critical
        y[1] = y[1] + 1
      end critical
      sync all
      if (y[1] /= num_images()) call fail('nested team count', y[1])
      sync all
    end team
    if (num_images() /= tnum) call fail('num_images after nested end team', num_images())
    ! ALLOCATE inside CHANGE TEAM is refused cleanly
    allocate(z(4)[*], stat=st, errmsg=msg)
    if (st == 0 .or. index(msg, 'CHANGE TEAM') == 0) call fail('allocate in team', st)
  end team
  if (this_image() /= me .or. num_images() /= n) call fail('after end team', this_image())
  ! re-forming the same team works and syncs
  do i = 1, 3
    form team(tn, again)
    change team(again)
      sync all
      x[1] = i
    end team
  end do
  sync all
  if (me <= 2 .and. x /= 3) call fail('re-formed team', x)
  sync all
  if (me == 1) print '(a)', 'PASS caf_teams_lib'
contains
  subroutine fail(what, val)
    character(*), intent(in) :: what
    integer, intent(in) :: val
    print *, 'FAIL caf_teams_lib: image', this_image(), what, val
    error stop 1
  end subroutine
end program
