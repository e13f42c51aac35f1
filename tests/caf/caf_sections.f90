! caf_sections.f90 -- array sections on the coindexed side.
!
! Checks puts, gets and image-to-image transfers (caf_sendget) of
!  * 1-D sections with positive and negative strides (a(10:1:-3)[j] = b(1:4)),
!  * 2-D sections (x(:,2:6:2)[j], x(5:1:-2,8:1:-3)[j]), scalars taken from
!    and stored into arrays, a scalar broadcast into a remote section,
!  * 3-D sections with mixed strides,
!  * vector subscripts on the coindexed side (a([3,1,2])[j]),
!  * whole-array transfers (a(:)[j]),
!  * zero-size sections (a(5:4)[j], a(1:10:-1)[j]),
!  * large (1 MiB) contiguous and strided transfers checked by checksums.
!
! Prints "PASS caf_sections" on image 1 on success; otherwise
! "FAIL caf_sections image <i>: ..." and error stop 1.  Any image count.
program caf_sections
  implicit none
  integer, parameter :: na = 20, nr = 6, nc = 8, d1 = 4, d2 = 5, d3 = 6
  integer, parameter :: nbig = 256 * 1024           ! 1 MiB of integer(4)
  integer, parameter :: brows = 512, bcols = 256    ! 512 KiB of integer(4)
  integer :: me, n, left, right, left2, i, j, k, iter
  integer :: a(na)[*], c(na)[*], loc(na), loc4(4), loc3(3), empty(0)
  integer :: x(nr, nc)[*], blk(3, 3), loc2(nr, nc)
  integer :: y(d1, d2, d3)[*], loc33(2, 2, 3)
  integer, allocatable :: big(:)[:], big2(:, :)[:], tmp(:), tmp2(:, :), tmp3(:), half2(:, :)
  integer(8) :: expected_sum, got_sum
  character(len=200) :: buf

  me = this_image()
  n = num_images()
  left = modulo(me - 2, n) + 1
  right = modulo(me, n) + 1
  left2 = modulo(me - 3, n) + 1

  ! ---- 1-D -----------------------------------------------------------
  call reset_1d()
  sync all
  a(10:1:-3)[right] = [-1, -2, -3, -4] * me     ! a(10),a(7),a(4),a(1)
  sync all
  call check_vec(a([10, 7, 4, 1]), [-1, -2, -3, -4] * left, 'put a(10:1:-3)[j] = b(1:4)')
  call check_vec(a([2, 3, 5, 6, 8, 9, 11, 20]), [(val_a(me, i), i = 2, 3), (val_a(me, i), i = 5, 6), &
                 (val_a(me, i), i = 8, 9), val_a(me, 11), val_a(me, 20)], &
                 'elements between the strided put are untouched')
  sync all
  call reset_1d()
  sync all
  loc4 = a(2:20:5)[right]
  call check_vec(loc4, [(val_a(right, i), i = 2, 20, 5)], 'get a(2:20:5)[j]')
  loc4(1:4) = a(19:1:-6)[right]
  call check_vec(loc4, [(val_a(right, i), i = 19, 1, -6)], 'get a(19:1:-6)[j]')
  loc(1) = a(17)[left]
  call check_vec(loc(1:1), [val_a(left, 17)], 'scalar from array a(17)[j]')
  ! image-to-image, strided on both sides
  c = 0
  sync all
  c(1:7:2)[right] = a(20:11:-3)[left]
  sync all
  call check_vec(c(1:7:2), [(val_a(left2, i), i = 20, 11, -3)], 'sendget c(1:7:2)[j] = a(20:11:-3)[k]')
  call check_vec(c(2:8:2), [0, 0, 0, 0], 'sendget left the gaps alone')
  sync all
  c(na:1:-1)[right] = a(:)[left]
  sync all
  call check_vec(c, [(val_a(left2, i), i = na, 1, -1)], 'sendget reversed whole array')
  sync all
  ! vector subscripts on the coindexed side
  loc3 = a([3, 1, 2])[right]
  call check_vec(loc3, [val_a(right, 3), val_a(right, 1), val_a(right, 2)], 'get a([3,1,2])[j]')
  sync all
  a([5, 20, 9])[right] = [55, 2020, 99] + me
  sync all
  call check_vec(a([5, 20, 9]), [55, 2020, 99] + left, 'put a([5,20,9])[j]')
  call check_vec(a([4, 6, 19]), [val_a(me, 4), val_a(me, 6), val_a(me, 19)], 'vector put left others alone')
  sync all
  ! whole arrays
  call reset_1d()
  sync all
  loc = a(:)[right]
  call check_vec(loc, [(val_a(right, i), i = 1, na)], 'get a(:)[j]')
  loc = 0
  loc(:) = a(1:na)[right]
  call check_vec(loc, [(val_a(right, i), i = 1, na)], 'get a(1:na)[j]')
  sync all
  ! (gfortran 12 rejects the whole-coarray designator c[j] for an array
  ! coarray: "Array section designator ... is required")
  c(:)[right] = -a
  sync all
  call check_vec(c, [(-val_a(left, i), i = 1, na)], 'put c(:)[j] = -a (whole array)')
  sync all
  ! zero-size sections: nothing may change
  a(5:4)[right] = empty
  a(1:10:-1)[right] = empty
  loc(1:0) = a(3:2)[right]
  c(9:8)[right] = a(7:6)[left]
  sync all
  call check_vec(a, [(val_a(me, i), i = 1, na)], 'zero-size puts changed nothing')
  call check_vec(c, [(-val_a(left, i), i = 1, na)], 'zero-size sendget changed nothing')
  sync all

  ! ---- 2-D -----------------------------------------------------------
  call reset_2d()
  sync all
  loc2(:, 1:3) = x(:, 2:6:2)[right]
  do j = 1, 3
    call check_vec(loc2(:, j), [(val_x(right, i, 2 * j), i = 1, nr)], 'get x(:,2:6:2)[j]')
  end do
  loc2(1:3, 1:3) = x(5:1:-2, 8:1:-3)[right]
  do j = 1, 3
    call check_vec(loc2(1:3, j), [(val_x(right, i, 8 - 3 * (j - 1)), i = 5, 1, -2)], 'get x(5:1:-2,8:1:-3)[j]')
  end do
  loc2(2, 2) = x(4, 7)[left]
  call check_vec(loc2(2:2, 2), [val_x(left, 4, 7)], 'get scalar x(4,7)[j]')
  sync all
  blk = reshape([(-(me * 100 + k), k = 1, 9)], [3, 3])
  x(2:6:2, 7:3:-2)[right] = blk
  x(1, :)[right] = -5
  x(6, 1)[right] = 123 * me
  sync all
  do j = 1, 3
    do i = 1, 3
      if (x(2 * i, 7 - 2 * (j - 1)) /= -(left * 100 + i + 3 * (j - 1))) then
        write(buf, '(a,i0,a,i0,a,i0,a,i0)') 'x(', 2 * i, ',', 7 - 2 * (j - 1), ') expected ', &
          -(left * 100 + i + 3 * (j - 1)), ' got ', x(2 * i, 7 - 2 * (j - 1))
        call fail('put x(2:6:2,7:3:-2)[j] = blk: ' // trim(buf))
      end if
    end do
  end do
  call check_vec(x(1, :), [(-5, j = 1, nc)], 'put x(1,:)[j] = scalar')
  call check_vec(x(6:6, 1), [123 * left], 'put scalar x(6,1)[j]')
  call check_vec(x(3, [2, 4, 6, 8]), [(val_x(me, 3, j), j = 2, 8, 2)], 'untouched row between strided rows')
  call check_vec(x(2, [2, 4, 6, 8]), [(val_x(me, 2, j), j = 2, 8, 2)], 'untouched columns between strided columns')
  sync all
  ! image-to-image 2-D: transposed-ish pick of rows into columns
  call reset_2d()
  sync all
  x(1:5:2, 2)[right] = x(6, 8:4:-2)[left]
  sync all
  call check_vec(x(1:5:2, 2), [(val_x(left2, 6, j), j = 8, 4, -2)], 'sendget x(1:5:2,2)[j] = x(6,8:4:-2)[k]')
  sync all

  ! ---- 3-D -----------------------------------------------------------
  y = reshape([(val_y_lin(me, k), k = 1, d1 * d2 * d3)], [d1, d2, d3])
  sync all
  loc33 = y(4:1:-3, 2:5:3, 6:1:-2)[right]
  do k = 1, 3
    do j = 1, 2
      do i = 1, 2
        if (loc33(i, j, k) /= val_y(right, 4 - 3 * (i - 1), 2 + 3 * (j - 1), 6 - 2 * (k - 1))) &
          call fail('get y(4:1:-3,2:5:3,6:1:-2)[j]')
      end do
    end do
  end do
  sync all
  y(:, 3, 2:6:2)[right] = reshape([(-k - me, k = 1, 12)], [d1, 3])
  y(1:3, 1, 1)[right] = y(2, 2:4, 3)[left]
  sync all
  do k = 1, 3
    call check_vec(y(:, 3, 2 * k), [(-(i + d1 * (k - 1)) - left, i = 1, d1)], 'put y(:,3,2:6:2)[j]')
    call check_vec(y(:, 3, 2 * k - 1), [(val_y(me, i, 3, 2 * k - 1), i = 1, d1)], 'y(:,3,odd) untouched')
  end do
  call check_vec(y(1:3, 1, 1), [(val_y(left2, 2, j, 3), j = 2, 4)], 'sendget y(1:3,1,1)[j] = y(2,2:4,3)[k]')
  call check_vec(y(4:4, 1, 1), [val_y(me, 4, 1, 1)], 'y(4,1,1) untouched by sendget')
  sync all

  ! ---- large transfers ---------------------------------------------------
  allocate(big(nbig)[*], big2(brows, bcols)[*])
  ! explicit bounds on the left-hand side ("tmp(1:nbig) =") keep the gets
  ! below plain caf_get: with an allocatable left-hand side gfortran 12
  ! emits caf_get_by_ref even for "tmp(:) = big(:)[j]" (covered in
  ! caf_derived)
  allocate(tmp(nbig), tmp3((nbig + 2) / 3), tmp2(brows, bcols), half2(brows / 2, bcols))
  do iter = 1, 2
    big = [(ieor(me * 7919 + iter, i), i = 1, nbig)]
    big2 = reshape([(me + iter + k, k = 1, brows * bcols)], [brows, bcols])
    sync all
    ! contiguous 1 MiB get
    tmp(1:nbig) = big(:)[right]
    got_sum = sum(int(tmp, 8))
    expected_sum = 0
    do i = 1, nbig
      expected_sum = expected_sum + ieor(right * 7919 + iter, i)
    end do
    call check_sum(got_sum, expected_sum, 'contiguous 1 MiB get')
    ! strided get (every 3rd element, about 340 KiB)
    tmp3(1:size(tmp3)) = big(1:nbig:3)[left]
    expected_sum = 0
    do i = 1, nbig, 3
      expected_sum = expected_sum + ieor(left * 7919 + iter, i)
    end do
    call check_sum(sum(int(tmp3, 8)), expected_sum, 'strided get big(1:n:3)[j]')
    ! strided 2-D get: every other row
    half2(1:brows / 2, 1:bcols) = big2(1:brows:2, :)[right]
    expected_sum = 0
    do j = 1, bcols
      do i = 1, brows, 2
        expected_sum = expected_sum + right + iter + (i + brows * (j - 1))
      end do
    end do
    call check_sum(sum(int(half2, 8)), expected_sum, 'strided 2-D get big2(1:m:2,:)[j]')
    sync all
    ! strided put of half the array (every second element, reversed)
    tmp(1:nbig / 2) = [(me * 3 + i, i = 1, nbig / 2)]
    big(nbig:2:-2)[right] = tmp(1:nbig / 2)
    ! contiguous 512 KiB put into the 2-D coarray
    tmp2(1:brows, 1:bcols) = reshape([(-(me + k), k = 1, brows * bcols)], [brows, bcols])
    big2(:, :)[right] = tmp2
    sync all
    expected_sum = 0
    do i = 1, nbig / 2
      expected_sum = expected_sum + left * 3 + i
    end do
    call check_sum(sum(int(big(nbig:2:-2), 8)), expected_sum, 'strided put big(n:2:-2)[j]')
    call check_vec(big(nbig:nbig - 4:-2), [left * 3 + 1, left * 3 + 2, left * 3 + 3], 'strided put order')
    expected_sum = 0
    do i = 1, nbig, 2
      expected_sum = expected_sum + ieor(me * 7919 + iter, i)
    end do
    call check_sum(sum(int(big(1:nbig:2), 8)), expected_sum, 'odd elements untouched by strided put')
    expected_sum = 0
    do k = 1, brows * bcols
      expected_sum = expected_sum - (left + k)
    end do
    call check_sum(sum(int(big2, 8)), expected_sum, 'contiguous 512 KiB put big2(:,:)[j]')
    sync all
  end do
  deallocate(big, big2, tmp, tmp2, tmp3, half2)

  sync all
  if (me == 1) write(*, '(a)') 'PASS caf_sections'

contains

  pure integer function val_a(img, i)
    integer, intent(in) :: img, i
    val_a = img * 1000 + i
  end function val_a

  pure integer function val_x(img, i, j)
    integer, intent(in) :: img, i, j
    val_x = img * 10000 + i * 100 + j
  end function val_x

  pure integer function val_y(img, i, j, k)
    integer, intent(in) :: img, i, j, k
    val_y = img * 100000 + i * 10000 + j * 100 + k
  end function val_y

  ! value of y at column-major linear position lin (1-based)
  pure integer function val_y_lin(img, lin)
    integer, intent(in) :: img, lin
    integer :: i, j, k
    i = mod(lin - 1, d1) + 1
    j = mod((lin - 1) / d1, d2) + 1
    k = (lin - 1) / (d1 * d2) + 1
    val_y_lin = val_y(img, i, j, k)
  end function val_y_lin

  subroutine reset_1d()
    integer :: ii
    a = [(val_a(me, ii), ii = 1, na)]
  end subroutine reset_1d

  subroutine reset_2d()
    integer :: ii, jj
    do jj = 1, nc
      do ii = 1, nr
        x(ii, jj) = val_x(me, ii, jj)
      end do
    end do
  end subroutine reset_2d

  subroutine fail(what)
    character(*), intent(in) :: what
    write(*, '(a,i0,a)') 'FAIL caf_sections image ', this_image(), ': ' // what
    error stop 1
  end subroutine fail

  subroutine check_vec(got, expected, what)
    integer, intent(in) :: got(:), expected(:)
    character(*), intent(in) :: what
    character(len=1000) :: msg
    if (size(got) /= size(expected)) call fail(what // ': size mismatch')
    if (any(got /= expected)) then
      write(msg, '(a,*(i0,:,","))') 'expected ', expected
      write(msg, '(a,a,*(i0,:,","))') trim(msg), ' got ', got
      call fail(what // ': ' // trim(msg))
    end if
  end subroutine check_vec

  subroutine check_sum(got, expected, what)
    integer(8), intent(in) :: got, expected
    character(*), intent(in) :: what
    character(len=100) :: msg
    if (got /= expected) then
      write(msg, '(a,i0,a,i0)') 'checksum expected ', expected, ' got ', got
      call fail(what // ': ' // trim(msg))
    end if
  end subroutine check_sum

end program caf_sections
