! caf_strided.f90 -- strided coindexed sections (puts, gets, image to
! image) against the values they must produce: a(1:n:2)[p] = b(1:n:2),
! negative strides, 2-D sections with strided rows and strided columns,
! many small elements (the runtime packs them) and rows of whole blocks.
program caf_strided
  implicit none
  integer, parameter :: n = 100000, m = 40
  real(8), allocatable :: a(:)[:], b(:)
  integer, allocatable :: g(:,:)[:]
  integer :: loc(m, m)
  integer :: me, np, p, q, i, j
  me = this_image(); np = num_images()
  p = merge(1, me + 1, me == np); q = merge(np, me - 1, me == 1)
  allocate(a(n)[*], b(n), g(m, m)[*])
  a = -1; g = -1
  do i = 1, n
    b(i) = me * 1000000 + i
  end do
  sync all
  ! strided put: every second element
  a(1:n:2)[p] = b(1:n:2)
  sync all
  do i = 1, n
    if (mod(i, 2) == 1) then
      call check(a(i) == q * 1000000 + i, 'a(1:n:2)[p] = b(1:n:2)', i)
    else
      call check(a(i) == -1, 'gap of a(1:n:2)[p] untouched', i)
    end if
  end do
  sync all
  ! strided get with a negative stride on the remote side
  b = 0
  b(1:n/3) = a(n:n-3*(n/3)+1:-3)[p]
  do i = 1, n / 3
    j = n - 3 * (i - 1)
    call check(b(i) == merge(real(me * 1000000 + j, 8), -1d0, mod(j, 2) == 1), &
               'b = a(n:..:-3)[p]', i)
  end do
  sync all
  ! 2-D: strided rows (g(1:m:3, :)) and whole rows at strided columns
  do j = 1, m
    do i = 1, m
      loc(i, j) = me * 10000 + i * 100 + j
    end do
  end do
  g(1:m:3, :)[p] = loc(1:m:3, :)
  g(:, 2:m:4)[p] = loc(:, 2:m:4)
  sync all
  do j = 1, m
    do i = 1, m
      if (mod(j - 2, 4) == 0 .and. j >= 2) then
        call check(g(i, j) == q * 10000 + i * 100 + j, 'g(:, 2:m:4)[p]', i * 1000 + j)
      else if (mod(i - 1, 3) == 0) then
        call check(g(i, j) == q * 10000 + i * 100 + j, 'g(1:m:3, :)[p]', i * 1000 + j)
      else
        call check(g(i, j) == -1, 'g outside the sections untouched', i * 1000 + j)
      end if
    end do
  end do
  sync all
  ! image to image: a strided section of image p's g into image q's a
  if (np >= 2) then
    a(1:2*m:2)[q] = real(g(1, 1:m)[p], 8)
    sync all
    do j = 1, m
      ! written by image p from g(1, j) of p's p, which p's p's q = p wrote
      call check(a(2 * j - 1) == real(p * 10000 + 100 + j, 8), &
                 'sendget a(1:2m:2)[q] = g(1, :)[p]', j)
    end do
  end if
  sync all
  if (me == 1) print '(a)', 'PASS caf_strided'
contains
  subroutine check(ok, what, at)
    logical, intent(in) :: ok
    character(*), intent(in) :: what
    integer, intent(in) :: at
    if (.not. ok) then
      print '(a,i0,a,a,a,i0)', 'FAIL caf_strided image ', this_image(), ': ', what, ' at ', at
      error stop 1
    end if
  end subroutine
end program
