! caf_event.f90 -- EVENT POST / EVENT WAIT / EVENT_QUERY.
!
! Checks:
!  * every image posts k times to its right neighbour's event; after a
!    sync all, event_query gives exactly k; event wait(until_count=k)
!    consumes them all (event_query then gives 0);
!  * many posters: all images post to image 1, which waits for them one
!    at a time (event wait without until_count) and in bulk;
!  * a ping-pong token travelling around the ring of images several
!    times, each hop carrying a value put before the post (so the post
!    must order the preceding put);
!  * an array of events (evs(2)[j]) and posts to the own image.
!
! Prints "PASS caf_event" on image 1 on success; otherwise
! "FAIL caf_event image <i>: ..." and error stop 1.  Any image count.
program caf_event
  use iso_fortran_env, only: event_type
  implicit none
  character(*), parameter :: test_name = 'caf_event'
  integer, parameter :: nposts = 5, nrounds = 20
  type(event_type) :: ev[*], evs(2)[*], ring[*]
  integer :: token[*], payload(3)[*]
  integer :: me, n, right, left, i, cnt, st, round

  me = this_image()
  n = num_images()
  right = modulo(me, n) + 1
  left = modulo(me - 2, n) + 1

  ! ---- post k times to the right, query, wait(until_count) ---------------
  call event_query(ev, cnt)
  call check_i(cnt, 0, 'event_query of a fresh event')
  sync all
  do i = 1, nposts
    event post (ev[right])
  end do
  sync all
  call event_query(ev, cnt, stat=st)
  call check_i(st, 0, 'event_query stat=')
  call check_i(cnt, nposts, 'event_query after the neighbour posted')
  event wait (ev, until_count=nposts)
  call event_query(ev, cnt)
  call check_i(cnt, 0, 'event_query after wait(until_count)')
  sync all

  ! ---- many posters to image 1 -----------------------------------------
  do i = 1, 3
    event post (evs(1)[1], stat=st)
    call check_i(st, 0, 'event post stat=')
  end do
  if (me == 1) then
    do i = 1, n                      ! one at a time
      event wait (evs(1))
    end do
    event wait (evs(1), until_count=2 * n)   ! the rest in one go
    call event_query(evs(1), cnt)
    call check_i(cnt, 0, 'all posts to image 1 consumed')
  end if
  sync all

  ! ---- posts to the own image and an array element --------------------------
  event post (evs(2))
  event post (evs(2)[me])
  call event_query(evs(2), cnt)
  call check_i(cnt, 2, 'posts to my own event')
  event wait (evs(2), until_count=2)
  sync all

  ! ---- ping-pong token around the ring -----------------------------------
  token = 0
  sync all
  if (n >= 2) then
    do round = 1, nrounds
      if (me == 1) then
        token[right] = token + 1
        payload(:)[right] = [round, me, -round]
        event post (ring[right])
        event wait (ring)
        call check_i(token, round * n, 'token value after a trip round the ring')
        call check_i(payload(2), left, 'payload put before the post (sender)')
        call check_i(payload(1), round, 'payload put before the post (round)')
      else
        event wait (ring)
        call check_i(token, (round - 1) * n + me - 1, 'token value arriving')
        call check_i(payload(1), round, 'payload arriving (round)')
        call check_i(payload(2), left, 'payload arriving (sender)')
        token[right] = token + 1
        payload(:)[right] = [round, me, -round]
        event post (ring[right])
      end if
    end do
  end if
  sync all
  call event_query(ring, cnt)
  call check_i(cnt, 0, 'no ring posts left over')

  sync all
  if (me == 1) write(*, '(a)') 'PASS caf_event'

contains

  include 'caf_check.inc'

end program caf_event
