! EVENT POST / WAIT / UNTIL_COUNT / EVENT_QUERY and a ring ping-pong that
! checks the poster's earlier puts are visible after the wait.
program caf_event_lib
  use iso_fortran_env
  implicit none
  integer, parameter :: rounds = 50
  type(event_type) :: ev[*], many[*], tok[*]
  integer :: box[*]
  integer :: me, n, c, r, left, right
  me = this_image(); n = num_images()
  right = 1 + mod(me, n); left = 1 + mod(me - 2 + n, n)
  box = 0
  ! 1. every image posts 3 times to image 1
  event post(many[1]); event post(many[1]); event post(many[1])
  if (me == 1) then
    event wait(many, until_count=3*n)
    call event_query(many, c)
    if (c /= 0) call fail('query after wait', c)
  end if
  sync all
  ! 2. query counts posts without consuming
  event post(ev[right])
  sync all
  call event_query(ev, c)
  if (c /= 1) call fail('query', c)
  event wait(ev)
  call event_query(ev, c)
  if (c /= 0) call fail('query after wait 2', c)
  sync all
  ! 3. ring: image 1 starts; each image reads the value its left
  ! neighbour put into its box, adds one, puts it right, posts.
  do r = 1, rounds
    if (me == 1) then
      box[right] = (r - 1) * n + 1
      event post(tok[right])
      event wait(tok)
      if (box /= r * n) call fail('ring value at image 1', box)
    else
      event wait(tok)
      if (box /= (r - 1) * n + me - 1) call fail('ring value', box)
      box[right] = box + 1
      event post(tok[right])
    end if
  end do
  sync all
  if (me == 1) print '(a)', 'PASS caf_event_lib'
contains
  subroutine fail(what, val)
    character(*), intent(in) :: what
    integer, intent(in) :: val
    print *, 'FAIL caf_event_lib: image', this_image(), what, val
    error stop 1
  end subroutine
end program
