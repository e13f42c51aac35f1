! caf_stop_coll.f90 -- collectives (STAT=) around an image that stops:
! one that took part is no error, one that did not is reported by every
! image that knows, even where the algorithm never waits for it.
!
!  1. Image 2 -- a leaf of CO_BROADCAST's tree from image 1, on the node
!     path and on the message path -- takes part in co_broadcast(stat=)
!     from image 1, checks the value, and stops.  Images 3..n enter the
!     same co_broadcast only once IMAGE_STATUS says image 2 has stopped:
!     it took part, so every image gets stat 0 and the value.
!  2. Image 2 has stopped before these calls: co_broadcast(stat=) from
!     image 1 (no image waits for a leaf), co_max(stat=) to image 1 and
!     co_sum(stat=) give STAT_STOPPED_IMAGE on every running image.
!
! Prints "PASS caf_stop_coll" on image 1; a failed check prints
! "FAIL caf_stop_coll image <i>: ..." and error stop 1.
!
! MIN-IMAGES: 3
! ALSO-ENV: FH_SHM=off
program caf_stop_coll
  use iso_fortran_env, only: stat_stopped_image
  implicit none
  character(*), parameter :: test_name = 'caf_stop_coll'
  integer :: me, n, st, x

  me = this_image()
  n = num_images()
  sync all

  ! 1. image 2 takes part, then stops; the others come after its stop
  x = merge(42, 0, me == 1)
  if (me >= 3) then
    do while (image_status(2) /= stat_stopped_image)
    end do
  end if
  st = -1
  call co_broadcast(x, 1, stat=st)
  call check_i(st, 0, 'co_broadcast (stat=) that image 2 took part in')
  call check_i(x, 42, 'the value broadcast')
  if (me == 2) stop

  ! 2. image 2 stopped before these
  if (me == 1) then
    do while (image_status(2) /= stat_stopped_image)
    end do
  end if
  x = merge(7, 0, me == 1)
  st = -1
  call co_broadcast(x, 1, stat=st)
  call check_i(st, stat_stopped_image, 'co_broadcast (stat=) after image 2 stopped')
  x = me
  st = -1
  call co_max(x, result_image=1, stat=st)
  call check_i(st, stat_stopped_image, 'co_max (stat=) to image 1 after image 2 stopped')
  x = me
  st = -1
  call co_sum(x, stat=st)
  call check_i(st, stat_stopped_image, 'co_sum (stat=) after image 2 stopped')
  if (me == 1) write (*, '(a)') 'PASS ' // test_name
contains
  include 'caf_check.inc'
end program caf_stop_coll
