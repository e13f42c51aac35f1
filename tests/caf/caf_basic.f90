! caf_basic.f90 -- self-checking test of the basic coarray machinery.
!
! Checks: this_image()/num_images(); sync all; sync images with a list,
! with (*) and between pairs of images; sync memory ordering a plain put
! before an atomic flag; static coarrays (scalar, array, two codimensions
! [2,*], non-default lower cobounds); allocatable coarrays allocated and
! deallocated repeatedly with different sizes (values correct after each
! re-allocation, interleaved allocations so freed memory gets reused);
! image_index, this_image(coarray), lcobound and ucobound; random_init.
!
! Prints "PASS caf_basic" on image 1 on success; otherwise
! "FAIL caf_basic image <i>: ..." and error stop 1.  Works on any number
! of images (parts that need a partner are skipped on one image).
program caf_basic
  use iso_fortran_env, only: atomic_int_kind
  implicit none
  integer :: me, n, left, right, partner, i, k, iter, sz
  integer :: scal[*]
  integer :: vec(8)[*]
  integer :: grid(3)[2, *]
  integer :: shifted[0:*]
  integer :: odd_bounds[2:3, -1:*]
  integer(atomic_int_kind) :: flag[*]
  integer :: payload(4)[*]
  integer, allocatable :: slots(:)[:]
  integer, allocatable :: dyn(:)[:], other(:)[:]
  integer, allocatable :: third(:, :)[:, :]
  real(8), allocatable :: ascal[:]
  integer, allocatable :: cosub(:)
  integer(atomic_int_kind) :: fval
  real(8) :: rnd[*], mine, again

  me = this_image()
  n = num_images()
  call check(n >= 1, 'num_images() >= 1')
  call check(me >= 1 .and. me <= n, '1 <= this_image() <= num_images()')
  left = modulo(me - 2, n) + 1
  right = modulo(me, n) + 1

  ! ---- sync all: every image writes its slot on image 1 --------------
  allocate(slots(n)[*])
  slots = -1
  sync all
  slots(me)[1] = 10 * me
  sync all
  if (me == 1) then
    do i = 1, n
      call check_i(int(slots(i), 8), int(10 * i, 8), 'slot written before sync all')
    end do
  end if
  sync all
  deallocate(slots)

  ! ---- sync images with a list (ring) ---------------------------------
  scal = -1
  sync all
  if (n >= 2) then
    do iter = 1, 20
      scal[right] = me * 1000 + iter
      if (n == 2) then
        sync images (right)
      else
        sync images ([left, right])
      end if
      call check_i(int(scal, 8), int(left * 1000 + iter, 8), 'ring value after sync images(list)')
      ! second barrier so the next put does not overwrite before the read
      if (n == 2) then
        sync images (right)
      else
        sync images ([right, left])
      end if
    end do
  end if

  ! ---- sync images(*) from image 1, sync images(1) on the others -------
  sync all
  do iter = 1, 10
    if (me == 1) then
      do i = 1, n
        vec(1)[i] = 77 + iter
      end do
      sync images (*)
    else
      sync images (1)
    end if
    call check_i(int(vec(1), 8), int(77 + iter, 8), 'value after sync images(*)')
    if (me == 1) then
      sync images (*)
    else
      sync images (1)
    end if
  end do

  ! ---- pairs: (1,2), (3,4), ... ----------------------------------------
  if (mod(me, 2) == 1) then
    partner = me + 1
  else
    partner = me - 1
  end if
  if (partner <= n) then
    do iter = 1, 10
      vec(2)[partner] = me + 100 * iter
      sync images (partner)
      call check_i(int(vec(2), 8), int(partner + 100 * iter, 8), 'pair exchange')
      sync images (partner)
    end do
  end if

  ! ---- sync memory + atomic flag (image 1 -> image n) -------------------
  sync all
  if (n >= 2) then
    if (me == 1) call atomic_define(flag[n], 0)
    sync all
    if (me == 1) then
      payload(:)[n] = [11, 22, 33, 44]
      sync memory
      call atomic_define(flag[n], 1)
    else if (me == n) then
      do
        call atomic_ref(fval, flag)
        if (fval == 1) exit
      end do
      sync memory
      call check_i(int(sum(payload * [1, 10, 100, 1000]), 8), int(11 + 220 + 3300 + 44000, 8), &
                   'payload visible after sync memory + flag')
    end if
  end if
  sync all

  ! ---- static coarrays: scalar and array get/put ------------------------
  scal = me
  vec = [(me * 100 + i, i = 1, 8)]
  sync all
  call check_i(int(scal[right], 8), int(right, 8), 'static scalar get')
  call check_i(int(vec(5)[left], 8), int(left * 100 + 5, 8), 'static array element get')
  call check(all(vec(:)[right] == [(right * 100 + i, i = 1, 8)]), 'static whole array get')
  sync all
  vec(3)[right] = -me
  sync all
  call check_i(int(vec(3), 8), int(-left, 8), 'static array element put')

  ! ---- multi-codimension coarrays and cobound intrinsics ---------------
  call check_i(int(lcobound(grid, 1), 8), 1_8, 'lcobound(grid,1)')
  call check_i(int(ucobound(grid, 1), 8), 2_8, 'ucobound(grid,1)')
  call check_i(int(lcobound(grid, 2), 8), 1_8, 'lcobound(grid,2)')
  call check_i(int(ucobound(grid, 2), 8), int((n + 1) / 2, 8), 'ucobound(grid,2)')
  cosub = this_image(grid)
  call check(size(cosub) == 2, 'size(this_image(grid)) == 2')
  call check_i(int(cosub(1), 8), int(mod(me - 1, 2) + 1, 8), 'this_image(grid) codim 1')
  call check_i(int(cosub(2), 8), int((me - 1) / 2 + 1, 8), 'this_image(grid) codim 2')
  call check_i(int(this_image(grid, 2), 8), int((me - 1) / 2 + 1, 8), 'this_image(grid, 2)')
  call check_i(int(image_index(grid, cosub), 8), int(me, 8), 'image_index(grid, this_image(grid))')
  call check_i(int(image_index(grid, [1, 1]), 8), 1_8, 'image_index(grid,[1,1])')
  if (n >= 4) call check_i(int(image_index(grid, [2, 2]), 8), 4_8, 'image_index(grid,[2,2])')
  call check_i(int(image_index(grid, [1, (n + 1) / 2 + 1]), 8), 0_8, 'image_index beyond ucobound')
  if (mod(n, 2) == 1) call check_i(int(image_index(grid, [2, (n + 1) / 2]), 8), 0_8, &
                                   'image_index of nonexistent image in last corow')
  grid = [me, -me, 2 * me]
  sync all
  ! write into the image at cosubscript [2,1] (image 2) from the last image
  if (n >= 2 .and. me == n) grid(2)[2, 1] = 4242
  sync all
  if (n >= 2 .and. me == 2) call check_i(int(grid(2), 8), 4242_8, 'put via [2,1] cosubscripts')
  call check_i(int(grid(3)[mod(left - 1, 2) + 1, (left - 1) / 2 + 1], 8), int(2 * left, 8), &
               'get via two cosubscripts')

  call check_i(int(this_image(shifted, 1), 8), int(me - 1, 8), 'this_image(shifted[0:*])')
  call check_i(int(lcobound(shifted, 1), 8), 0_8, 'lcobound(shifted)')
  call check_i(int(ucobound(shifted, 1), 8), int(n - 1, 8), 'ucobound(shifted)')
  shifted = me * 3
  sync all
  call check_i(int(shifted[right - 1], 8), int(3 * right, 8), 'get from [0:*] coarray')
  call check_i(int(lcobound(odd_bounds, 1), 8), 2_8, 'lcobound(odd_bounds,1)')
  call check_i(int(lcobound(odd_bounds, 2), 8), -1_8, 'lcobound(odd_bounds,2)')
  call check_i(int(ucobound(odd_bounds, 2), 8), int(-1 + (n + 1) / 2 - 1, 8), 'ucobound(odd_bounds,2)')
  cosub = this_image(odd_bounds)
  call check_i(int(cosub(1), 8), int(2 + mod(me - 1, 2), 8), 'this_image(odd_bounds) codim 1')
  call check_i(int(cosub(2), 8), int(-1 + (me - 1) / 2, 8), 'this_image(odd_bounds) codim 2')
  call check_i(int(image_index(odd_bounds, [3, -1]), 8), merge(2_8, 0_8, n >= 2), &
               'image_index(odd_bounds,[3,-1])')
  odd_bounds = 5 * me
  sync all
  call check_i(int(odd_bounds[2 + mod(right - 1, 2), -1 + (right - 1) / 2], 8), int(5 * right, 8), &
               'get from [2:3,-1:*] coarray')
  sync all

  ! ---- allocatable coarrays: repeated allocate/deallocate --------------
  do iter = 1, 25
    sz = 1 + mod(iter * 997, 5000)
    allocate(dyn(sz)[*])
    call check(size(dyn) == sz, 'size after allocate')
    dyn = [(me * 100000 + iter * 7 + i, i = 1, sz)]
    if (mod(iter, 3) == 0) then
      allocate(other(2 * sz + 1)[*])
      other = -iter
    end if
    sync all
    k = 1 + mod(iter * 31, sz)
    call check_i(int(dyn(k)[right], 8), int(right * 100000 + iter * 7 + k, 8), 'get from re-allocated coarray')
    call check_i(int(dyn(sz)[left], 8), int(left * 100000 + iter * 7 + sz, 8), 'get last element')
    if (allocated(other)) then
      call check_i(int(other(2 * sz + 1)[right], 8), int(-iter, 8), 'get from interleaved coarray')
    end if
    sync all
    dyn(1)[right] = -me
    sync all
    call check_i(int(dyn(1), 8), int(-left, 8), 'put into re-allocated coarray')
    ! deallocate in varying orders so the allocator reuses holes
    if (mod(iter, 2) == 0 .and. allocated(other)) deallocate(other)
    deallocate(dyn)
    call check(.not. allocated(dyn), 'not allocated after deallocate')
    if (allocated(other)) deallocate(other)
  end do

  ! allocatable scalar and 2-D coarrays with two codimensions
  do iter = 1, 5
    allocate(ascal[*])
    allocate(third(iter, iter + 1)[2, *])
    ascal = me + 0.5d0 * iter
    third = me * iter
    sync all
    call check(ascal[right] == right + 0.5d0 * iter, 'get of allocatable scalar coarray')
    call check_i(int(third(iter, iter + 1)[mod(right - 1, 2) + 1, (right - 1) / 2 + 1], 8), &
                 int(right * iter, 8), 'get from allocatable [2,*] coarray')
    sync all
    deallocate(ascal, third)
  end do

  ! ---- random_init --------------------------------------------------------
  ! repeatable + image_distinct: the same numbers again on a repeated call,
  ! different numbers from image 1's on the other images.
  call random_init(repeatable=.true., image_distinct=.true.)
  call random_number(mine)
  rnd = mine
  call random_init(repeatable=.true., image_distinct=.true.)
  call random_number(again)
  call check(again == mine, 'random_init(repeatable=.true.) repeats the sequence')
  sync all
  if (me /= 1) call check(rnd[1] /= mine, 'random_init(image_distinct=.true.) gives distinct numbers')

  sync all
  if (me == 1) write(*, '(a)') 'PASS caf_basic'

contains

  subroutine fail(what)
    character(*), intent(in) :: what
    write(*, '(a,i0,a)') 'FAIL caf_basic image ', this_image(), ': '//what
    error stop 1
  end subroutine fail

  subroutine check(cond, what)
    logical, intent(in) :: cond
    character(*), intent(in) :: what
    if (.not. cond) call fail(what)
  end subroutine check

  subroutine check_i(got, expected, what)
    integer(8), intent(in) :: got, expected
    character(*), intent(in) :: what
    character(len=80) :: buf
    if (got /= expected) then
      write(buf, '(a,i0,a,i0)') ', expected ', expected, ', got ', got
      call fail(what//trim(buf))
    end if
  end subroutine check_i

end program caf_basic
