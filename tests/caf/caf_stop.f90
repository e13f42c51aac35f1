! caf_stop.f90 -- images stopping normally at different times.
!
! Image k (k >= 2) works for a while (puts into image 1, sized by k),
! then executes STOP with no further synchronization; the even ones use
! "stop 0" (a numeric stop code), the odd ones a plain "stop".  Image 1
! waits (event wait) until every other image has reported its work, checks
! the totals, then stops.  A stopped image must not take the others down:
! the program ends normally and the launcher exits with status 0.
!
! OpenCoarrays 2.10.1: passes on 1-4 images; on 8 images a stopping
! image calls MPI_ABORT (error code 0), which kills image 1 before it
! prints PASS (the launcher still exits 0).
!
! Prints "PASS caf_stop" on image 1 on success; otherwise
! "FAIL caf_stop image <i>: ..." and error stop 1.  Any image count.
program caf_stop
  use iso_fortran_env, only: event_type
  implicit none
  integer, parameter :: nwork = 50
  type(event_type) :: done[*]
  integer :: work(64)[*]
  integer :: me, n, i, k, total

  me = this_image()
  n = num_images()
  work = 0
  sync all
  if (me /= 1) then
    do i = 1, nwork * me
      work(mod(me - 1, 64) + 1)[1] = i
    end do
    event post (done[1])
    if (mod(me, 2) == 0) then
      stop 0
    else
      stop
    end if
  end if
  ! image 1: wait for the others, keep working in between
  if (n >= 2) event wait (done, until_count=n - 1)
  total = 0
  do k = 2, n
    total = total + work(mod(k - 1, 64) + 1)
  end do
  if (n <= 64 .and. total /= nwork * (n * (n + 1) / 2 - 1)) then
    write(*, '(a,i0,a,i0)') 'FAIL caf_stop image 1: work totals expected ', nwork * (n * (n + 1) / 2 - 1), ' got ', total
    error stop 1
  end if
  write(*, '(a)') 'PASS caf_stop'
end program caf_stop
