! caf_teams.f90 -- FORM TEAM / CHANGE TEAM / END TEAM / SYNC TEAM.
!
! Checks: form team splitting the images into odd and even ones (team
! numbers 1 and 2; gfortran 12 rejects NEW_INDEX= and STAT=, and without it the
! order of the images in a team is processor dependent, so the test learns
! the mapping through a coarray and checks it is a permutation);
! team_number() outside (-1) and inside a team; this_image() and
! num_images() inside the team; coindexed puts and gets inside the team
! with team-relative image indices; sync all and sync team inside the
! team; co_sum inside the team; this_image()/num_images() restored after
! end team; a second, nested form team/change team inside the first
! (splitting each team into halves); a team of all images (team number
! 1) used repeatedly.  (gfortran 12 rejects get_team(); not used.)
!
! Prints "PASS caf_teams" on image 1 on success; otherwise
! "FAIL caf_teams image <i>: ..." and error stop 1.  Any image count.
program caf_teams
  use iso_fortran_env, only: team_type
  implicit none
  type(team_type) :: parity, halves, everyone
  integer :: box[*], vals(4)[*]
  integer :: me, n, my_team, tme, tn, expected_n, tright, s, i, iter
  integer :: inner_n, inner_me
  integer, allocatable :: ids(:)[:], map(:)

  me = this_image()
  n = num_images()
  call check_i(team_number(), -1, 'team_number() of the initial team')

  ! ---- odd/even split -----------------------------------------------------
  my_team = 2 - mod(me, 2)                   ! odd images -> 1, even -> 2
  if (my_team == 1) then
    expected_n = (n + 1) / 2
    form team (my_team, parity)
  else
    expected_n = n / 2
    form team (my_team, parity)      ! gfortran 12 rejects stat= here too
  end if
  allocate(ids(n)[*])
  ids = 0
  box = -1
  vals = 0
  sync all
  change team (parity)
    tme = this_image()
    tn = num_images()
    call check_i(team_number(), my_team, 'team_number() inside the team')
    call check_i(tn, expected_n, 'num_images() inside the team')
    call check(tme >= 1 .and. tme <= tn, 'this_image() inside the team is in 1..num_images()')
    ! learn the team-index -> initial-index mapping through team image 1
    ids(tme)[1] = me
    sync all
    map = ids(1:tn)[1]
    call check_i(map(tme), me, 'mapping read back from team image 1')
    do i = 1, tn
      call check_i(count(map == 2 * i - 2 + my_team), 1, 'team members are exactly the odd/even images')
    end do
    sync all
    ! team-relative coindexed put to the right neighbour inside the team
    tright = modulo(tme, tn) + 1
    box[tright] = me                         ! the initial-team index of the sender
    sync all                                  ! a sync all of the team only
    call check_i(box, map(modulo(tme - 2, tn) + 1), 'put to [team-relative index]')
    ! get from team image 1
    call check_i(box[1], map(tn), 'get from [1] inside the team')
    sync team (parity)
    s = tme
    call co_sum(s)
    call check_i(s, tn * (tn + 1) / 2, 'co_sum inside the team')
    s = me
    call co_sum(s, result_image=1)
    if (tme == 1) call check_i(s, sum(map), 'co_sum result_image inside the team')

    ! ---- nested teams: split the team into halves ----------------------
    form team (1 + merge(1, 0, tme > (tn + 1) / 2), halves)
    change team (halves)
      inner_n = num_images()
      inner_me = this_image()
      if (tme <= (tn + 1) / 2) then
        call check_i(inner_n, (tn + 1) / 2, 'num_images() in the nested team (first half)')
      else
        call check_i(inner_n, tn - (tn + 1) / 2, 'num_images() in the nested team (second half)')
      end if
      call check(inner_me >= 1 .and. inner_me <= inner_n, 'this_image() in the nested team')
      call check_i(team_number(), 1 + merge(1, 0, tme > (tn + 1) / 2), 'team_number() in the nested team')
      s = 1
      call co_sum(s)
      call check_i(s, inner_n, 'co_sum in the nested team')
      vals(1)[modulo(inner_me, inner_n) + 1] = inner_me
      sync all
      call check_i(vals(1), modulo(inner_me - 2, inner_n) + 1, 'put in the nested team')
    end team
    call check_i(num_images(), tn, 'num_images() after the nested end team')
    call check_i(team_number(), my_team, 'team_number() after the nested end team')
  end team
  call check_i(num_images(), n, 'num_images() after end team')
  call check_i(this_image(), me, 'this_image() after end team')
  call check_i(team_number(), -1, 'team_number() after end team')
  sync all

  ! ---- a team of everyone, entered repeatedly -------------------------------
  form team (1, everyone)
  do iter = 1, 5
    change team (everyone)
      call check_i(num_images(), n, 'num_images() in the all-images team')
      call check_i(this_image(), me, 'this_image() in the all-images team')
      vals(2)[modulo(me, n) + 1] = iter * 100 + me
      sync team (everyone)
      call check_i(vals(2), iter * 100 + modulo(me - 2, n) + 1, 'put in the all-images team')
      sync team (everyone)
    end team
  end do

  sync all
  if (me == 1) write(*, '(a)') 'PASS caf_teams'

contains

  subroutine check(cond, what)
    logical, intent(in) :: cond
    character(*), intent(in) :: what
    if (.not. cond) then
      write(*, '(a,i0,a)') 'FAIL caf_teams image ', me, ': ' // what
      error stop 1
    end if
  end subroutine check

  subroutine check_i(gotv, expected, what)
    integer, intent(in) :: gotv, expected
    character(*), intent(in) :: what
    character(len=80) :: buf
    if (gotv /= expected) then
      write(buf, '(a,i0,a,i0)') ', expected ', expected, ', got ', gotv
      call check(.false., what // trim(buf))
    end if
  end subroutine check_i

end program caf_teams
