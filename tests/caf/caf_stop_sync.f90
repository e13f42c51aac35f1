! caf_stop_sync.f90 -- SYNC ALL (STAT=) of the initial team once an image
! has stopped: the effect of SYNC MEMORY, no wait (Fortran 2018 11.6.11),
! and the statements that synchronize the active images still pair up.
!
!  1. The last image stops about 0.3 s after a SYNC ALL with everyone,
!     while image 1 already waits in sync all(stat=) and image 2 waits in
!     sync images(1) (it executes sync all(stat=) only after it).  Image 1
!     must leave its SYNC ALL when it learns of the stop -- waiting for
!     image 2 would never end -- with STAT_STOPPED_IMAGE, then pair with
!     image 2's SYNC IMAGES.  The other images' sync all(stat=) give
!     STAT_STOPPED_IMAGE too, and right after it IMAGE_STATUS of the last
!     image is STAT_STOPPED_IMAGE on every running image.
!  2. The stop is known: image 1 executes sync all(stat=) three times, the
!     others once; each gives STAT_STOPPED_IMAGE at once.
!  3. The running images still communicate: a put into a coarray
!     allocated before the stop is seen by the next running image after
!     SYNC IMAGES with the two neighbours.  DEALLOCATE (stat=) of it still
!     synchronizes the running images (whichever of their SYNC ALLs above
!     were left open or never entered) and gives STAT_STOPPED_IMAGE.
!     (Not ALLOCATE: gfortran 12 follows ALLOCATE of a coarray with a SYNC
!     ALL of its own, without STAT=, which ends the job once an image
!     stopped, whatever STAT= the ALLOCATE has.)
! A hang (a SYNC ALL that waits for an image waiting in SYNC IMAGES, or an
! ALLOCATE paired with another image's SYNC ALL) is the test's timeout.
!
! Prints "PASS caf_stop_sync" on image 1; a failed check prints
! "FAIL caf_stop_sync image <i>: ..." and error stop 1.
!
! MIN-IMAGES: 3
! ALSO-ENV: FH_SHM=off
program caf_stop_sync
  use iso_fortran_env, only: stat_stopped_image
  implicit none
  character(*), parameter :: test_name = 'caf_stop_sync'
  integer, allocatable :: c(:)[:]
  integer :: me, n, last, st, k, left, right
  integer(8) :: t0, t1, rate

  me = this_image()
  n = num_images()
  last = n
  allocate (c(4)[*])
  sync all

  ! 1. a stop learnt during the wait
  if (me == last) then
    call system_clock(t0, rate)
    do
      call system_clock(t1)
      if (t1 - t0 >= rate * 3 / 10) exit
    end do
    stop
  end if
  st = -1
  if (me == 1) then
    sync all (stat=st)
    call check_i(st, stat_stopped_image, 'sync all (stat=) while the last image stops')
    sync images (2)
  else if (me == 2) then
    sync images (1)
    sync all (stat=st)
    call check_i(st, stat_stopped_image, 'sync all (stat=) after sync images (1)')
  else
    sync all (stat=st)
    call check_i(st, stat_stopped_image, 'sync all (stat=) while the last image stops')
  end if
  call check_i(image_status(last), stat_stopped_image, 'image_status(last) after sync all')

  ! 2. the stop is known: SYNC ALL is SYNC MEMORY, whatever the others do
  do k = 1, merge(3, 1, me == 1)
    st = -1
    sync all (stat=st)
    call check_i(st, stat_stopped_image, 'sync all (stat=) with the stop known')
  end do

  ! 3. the running images 1 .. n-1 go on
  left = merge(n - 1, me - 1, me == 1)
  right = merge(1, me + 1, me == n - 1)
  c = 0
  call sync_neighbours()
  c(1)[right] = 1000 + me
  call sync_neighbours()
  call check_i(c(1), 1000 + left, 'the put of the left neighbour')
  call sync_neighbours()
  st = -1
  deallocate (c, stat=st)
  call check_i(st, stat_stopped_image, 'deallocate (stat=) of a coarray')
  if (me == 1) write (*, '(a)') 'PASS ' // test_name
contains
  subroutine sync_neighbours()
    if (left == right) then
      sync images (left)
    else
      sync images ([left, right])
    end if
  end subroutine sync_neighbours
  include 'caf_check.inc'
end program caf_stop_sync
