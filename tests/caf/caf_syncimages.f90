! caf_syncimages.f90 -- SYNC IMAGES with partners that stop: a partner
! that executed its matching SYNC IMAGES and then stopped is no error; one
! that stopped before matching gives STAT_STOPPED_IMAGE.
!
! Checks:
!  * a halo exchange on a ring (puts into the neighbours' ghost cells,
!    SYNC IMAGES with both neighbours, ghosts checked) whose images run at
!    different speeds (image-dependent busy waits), every SYNC IMAGES
!    with stat= 0;
!  * then the images finish at different times: image 1 executes SYNC
!    IMAGES (*) while image 2 is slow to match (a 0.2 s busy wait) and
!    images 3.. match and stop at once, image 2 after matching: image 1
!    finds partners stopped after they matched, stat= must be 0;
!  * image 1 then executes SYNC IMAGES with the last image, which stopped
!    without matching this one: STAT_STOPPED_IMAGE and ERRMSG= set, twice.
! Before libcaf_firehose counted what a stopped partner had sent, the
! second gave STAT_STOPPED_IMAGE ("image 3 has stopped"), deterministically
! on 3 and more images (by chance on 2).
!
! Runs twice: on one host the images notify each other by atomic adds in
! shared memory; with FH_SHM=off by active messages.
! ALSO-ENV: FH_SHM=off
!
! Prints "PASS caf_syncimages" on image 1 on success; otherwise
! "FAIL caf_syncimages image <i>: ..." and error stop 1.  Any image count.
program caf_syncimages
  use iso_fortran_env, only: stat_stopped_image
  implicit none
  character(*), parameter :: test_name = 'caf_syncimages'
  integer, parameter :: m = 4, nsteps = 20
  integer :: a(0:m+1)[*]
  integer :: me, n, left, right, step, st, j
  character(len=100) :: msg

  me = this_image()
  n = num_images()
  left = modulo(me - 2, n) + 1
  right = modulo(me, n) + 1

  ! ---- a ring halo exchange, images at different speeds ----------------------
  do step = 1, nsteps
    a(1:m) = 1000 * step + 10 * me + [(j, j = 1, m)]
    a(0) = -1
    a(m+1) = -1
    if (n >= 2) then
      call nbrs_sync('sync images before the puts')  ! ghosts reset
      a(m+1)[left] = a(1)
      a(0)[right] = a(m)
      call nbrs_sync('sync images after the puts')
      call check_i(a(0), 1000 * step + 10 * left + m, 'left ghost')
      call check_i(a(m+1), 1000 * step + 10 * right + 1, 'right ghost')
      ! Even images are slower in odd steps, odd ones in even steps.
      if (modulo(step + me, 2) == 0) call spin(0.002d0)
    end if
  end do

  ! ---- the hub: partners match, then stop, at different times -----------------
  if (me == 1) then
    sync images (*, stat=st)
    call check_i(st, 0, 'sync images(*) with partners that matched, then stopped')
  else
    if (me == 2) call spin(0.2d0)
    sync images (1, stat=st)
    call check_i(st, 0, 'sync images(1) matching the hub')
    stop
  end if

  ! ---- a partner that stopped without matching ------------------------------
  if (num_images() >= 2) then
    msg = 'untouched'
    sync images (num_images(), stat=st, errmsg=msg)
    call check_i(st, stat_stopped_image, 'sync images with an image that stopped unmatched')
    call check(msg /= 'untouched', 'errmsg set for a stopped partner')
    sync images (num_images(), stat=st)
    call check_i(st, stat_stopped_image, 'sync images with it again')
  end if

  write(*, '(a)') 'PASS caf_syncimages'

contains

  ! SYNC IMAGES with both ring neighbours (one on two images), stat= 0.
  subroutine nbrs_sync(what)
    character(*), intent(in) :: what
    integer :: st2
    if (left == right) then
      sync images (left, stat=st2)
    else
      sync images ([left, right], stat=st2)
    end if
    call check_i(st2, 0, what)
  end subroutine nbrs_sync

  ! Busy for `seconds` (no coarray statement: the image does not poll).
  subroutine spin(seconds)
    double precision, intent(in) :: seconds
    integer(8) :: c0, c, rate
    call system_clock(c0, rate)
    do
      call system_clock(c)
      if (dble(c - c0) / dble(rate) >= seconds) exit
    end do
  end subroutine spin

  include 'caf_check.inc'

end program caf_syncimages
