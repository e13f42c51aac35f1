! caf_bigheap.f90 -- a coarray much larger than the firehose budget.
!
! Allocates an integer(8) coarray of S MiB per image, where S is the first
! command-line argument, else the environment variable FH_CAF_BIGHEAP_MB,
! else 64; the number of passes is the second argument, else
! FH_CAF_BIGHEAP_PASSES, else 2.  Each pass every image
!  1. writes its right neighbour's whole coarray in 1 MiB chunks, visited
!     in a scattered order (chunk c*7 mod nchunks), with a pattern that
!     depends on writer, pass and position;
!  2. after sync all, checks its own coarray completely (per-chunk
!     checksums, so a failure names the chunk);
!  3. reads its left neighbour's whole coarray back in chunks, in reverse
!     order, and checks the checksums of what the left neighbour received.
! The driver runs this with a small firehose budget (FH_FIREHOSE_M) so the
! working set is at least 4x the budget and registrations must be recycled.
!
! Prints "PASS caf_bigheap" on image 1 on success; otherwise
! "FAIL caf_bigheap image <i>: ..." and error stop 1.  Any image count.
program caf_bigheap
  implicit none
  integer(8), parameter :: chunk = 131072            ! elements: 1 MiB
  integer(8), allocatable :: big(:)[:], buf(:)
  integer(8) :: nel, nchunks, c, k, lo, hi, i, got, expected
  integer :: me, n, left, right, left2, pass, npasses, mib
  character(len=32) :: arg
  character(len=200) :: msg

  me = this_image()
  n = num_images()
  left = modulo(me - 2, n) + 1
  right = modulo(me, n) + 1
  left2 = modulo(me - 3, n) + 1
  mib = setting(1, 'FH_CAF_BIGHEAP_MB', 64)
  npasses = setting(2, 'FH_CAF_BIGHEAP_PASSES', 2)
  if (mib < 1) call fail('size must be at least 1 MiB')
  nel = int(mib, 8) * 1024 * 1024 / 8
  nchunks = (nel + chunk - 1) / chunk
  allocate(big(nel)[*], buf(chunk))
  big = 0
  sync all

  do pass = 1, npasses
    ! 1. scattered chunked puts into the right neighbour
    do k = 0, nchunks - 1
      c = coprime_order(k, nchunks)
      lo = c * chunk + 1
      hi = min(nel, lo + chunk - 1)
      do i = lo, hi
        buf(i - lo + 1) = pattern(me, pass, i)
      end do
      big(lo:hi)[right] = buf(1:hi - lo + 1)
    end do
    sync all
    ! 2. check what the left neighbour wrote here
    do c = 0, nchunks - 1
      lo = c * chunk + 1
      hi = min(nel, lo + chunk - 1)
      got = 0
      expected = 0
      do i = lo, hi
        got = ieor(got, big(i)) + 1
        expected = ieor(expected, pattern(left, pass, i)) + 1
      end do
      if (got /= expected) then
        write(msg, '(a,i0,a,i0,a,i0,a,i0)') 'pass ', pass, ': chunk ', c, ' written by image ', left, &
          ' has a bad checksum; first bad element offset ', first_bad(lo, hi, left, pass) - lo
        call fail(trim(msg))
      end if
    end do
    ! 3. read the left neighbour's coarray back, chunks in reverse order
    do c = nchunks - 1, 0, -1
      lo = c * chunk + 1
      hi = min(nel, lo + chunk - 1)
      buf(1:hi - lo + 1) = big(lo:hi)[left]
      got = 0
      expected = 0
      do i = lo, hi
        got = ieor(got, buf(i - lo + 1)) + 1
        expected = ieor(expected, pattern(left2, pass, i)) + 1
      end do
      if (got /= expected) then
        write(msg, '(a,i0,a,i0,a,i0)') 'pass ', pass, ': chunk ', c, ' read from image ', left
        call fail(trim(msg) // ' has a bad checksum')
      end if
    end do
    sync all
  end do

  deallocate(big)
  sync all
  if (me == 1) write(*, '(a)') 'PASS caf_bigheap'

contains

  pure integer(8) function pattern(img, p, i)
    integer, intent(in) :: img, p
    integer(8), intent(in) :: i
    pattern = ieor(int(img, 8) * 2_8**40 + int(p, 8) * 2_8**32, i * 2654435761_8)
  end function pattern

  ! visit chunks in a scattered order: a stride coprime to nchunks
  pure integer(8) function coprime_order(kk, nc)
    integer(8), intent(in) :: kk, nc
    integer(8) :: stride
    stride = 7
    do while (gcd(stride, nc) /= 1)
      stride = stride + 2
    end do
    coprime_order = mod(kk * stride, nc)
  end function coprime_order

  pure integer(8) function gcd(a, b)
    integer(8), intent(in) :: a, b
    integer(8) :: x, y, t
    x = a
    y = b
    do while (y /= 0)
      t = mod(x, y)
      x = y
      y = t
    end do
    gcd = x
  end function gcd

  integer(8) function first_bad(lo_, hi_, img, p)
    integer(8), intent(in) :: lo_, hi_
    integer, intent(in) :: img, p
    integer(8) :: ii
    first_bad = hi_ + 1
    do ii = lo_, hi_
      if (big(ii) /= pattern(img, p, ii)) then
        first_bad = ii
        return
      end if
    end do
  end function first_bad

  integer function setting(argno, envname, default)
    integer, intent(in) :: argno, default
    character(*), intent(in) :: envname
    integer :: length, st
    setting = default
    call get_environment_variable(envname, arg, length, st)
    if (st == 0 .and. length > 0) read(arg, *) setting
    if (command_argument_count() >= argno) then
      call get_command_argument(argno, arg)
      read(arg, *) setting
    end if
  end function setting

  subroutine fail(what)
    character(*), intent(in) :: what
    write(*, '(a,i0,a)') 'FAIL caf_bigheap image ', this_image(), ': ' // what
    error stop 1
  end subroutine fail

end program caf_bigheap
