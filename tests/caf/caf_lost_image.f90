! caf_lost_image.f90 -- an image waiting for a message from an image whose
! connection was lost ends with an error naming that image, rather than
! waiting for ever (issue 29 class 3; caf_poll's check of fh_am_lost).
!
! Over tcp with FH_SHM=off (the images reach each other through
! connections; on the node route nothing can be lost).  After SYNC ALL,
! every image but 1 executes SYNC IMAGES (1) and waits for image 1's
! notification; image 1 does not execute it: it sleeps (no runtime call),
! shuts down its TCP sockets (shutdown(2) on every connected AF_INET or
! AF_INET6 socket, found with getsockname and getpeername) and sleeps
! again.  Expected: an image in SYNC IMAGES says "caf: image I: progress:
! the connection with image 1 was lost ..." and the job ends nonzero.
! Before libcaf_firehose looked at fh_am_lost, the waiting images waited
! until the launcher's timeout.
!
! EXPECT-FAIL: the connection with image 1 was lost
! MIN-IMAGES: 2
! ONLY-ENV: FH_SHM=off FH_OFI_PROVIDER=tcp
program caf_lost_image
  use iso_c_binding, only: c_int, c_char
  implicit none
  interface
    integer(c_int) function c_shutdown(fd, how) bind(c, name='shutdown')
      import :: c_int
      integer(c_int), value :: fd, how
    end function c_shutdown
    integer(c_int) function c_getsockname(fd, addr, len) bind(c, name='getsockname')
      import :: c_int, c_char
      integer(c_int), value :: fd
      character(kind=c_char) :: addr(*)
      integer(c_int) :: len
    end function c_getsockname
    integer(c_int) function c_getpeername(fd, addr, len) bind(c, name='getpeername')
      import :: c_int, c_char
      integer(c_int), value :: fd
      character(kind=c_char) :: addr(*)
      integer(c_int) :: len
    end function c_getpeername
  end interface
  integer :: me

  me = this_image()
  sync all
  if (me == 1) then
    call sleep(1)
    call shut_tcp()
    call sleep(30)
    print '(a)', 'FAIL caf_lost_image image 1: the job did not end'
  else
    sync images (1)
    print '(a,i0,a)', 'FAIL caf_lost_image image ', me, ': SYNC IMAGES returned'
  end if
  error stop 1

contains

  ! shutdown(2) on this process's connected TCP sockets.
  subroutine shut_tcp()
    character(kind=c_char) :: addr(128)
    integer(c_int) :: len, fd, family
    do fd = 3, 1023
      len = 128
      if (c_getsockname(fd, addr, len) /= 0) cycle
      family = ichar(addr(1)) + 256 * ichar(addr(2))   ! sa_family_t, little endian
      if (family /= 2 .and. family /= 10) cycle        ! AF_INET, AF_INET6
      len = 128
      if (c_getpeername(fd, addr, len) /= 0) cycle     ! a listener
      if (c_shutdown(fd, 2_c_int) /= 0) cycle          ! SHUT_RDWR
    end do
  end subroutine shut_tcp
end program caf_lost_image
