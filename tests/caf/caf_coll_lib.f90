! caf_coll_lib.f90 -- self-checking test of the collective subroutines
! CO_SUM, CO_MIN, CO_MAX, CO_BROADCAST and CO_REDUCE (libcaf_firehose,
! caf/caf_coll.c).  Run on any number of images; image 1 prints
! "PASS caf_coll_lib" or the failures then ERROR STOP 1.
module coll_ops
  implicit none
  type :: pt
    integer :: a
    real :: b
  end type
  type :: dg                 ! a digit string: value and 10**length
    integer(8) :: v, p
  end type
  type :: big
    integer(8) :: v(5)
    character(len=3) :: s
  end type
contains
  pure function addi(x, y) result(z)
    integer, intent(in) :: x, y
    integer :: z
    z = x + y
  end function
  pure function addi8v(x, y) result(z)
    integer(8), value :: x, y
    integer(8) :: z
    z = x + y
  end function
  pure function mulr(x, y) result(z)
    real(8), intent(in) :: x, y
    real(8) :: z
    z = x * y
  end function
  pure function cmaxf(x, y) result(z)
    character(len=*), intent(in) :: x, y
    character(len=len(x)) :: z
    if (x >= y) then
      z = x
    else
      z = y
    end if
  end function
  pure function addp(x, y) result(z)
    type(pt), intent(in) :: x, y
    type(pt) :: z
    z%a = x%a + y%a
    z%b = x%b + y%b
  end function
  pure function addbig(x, y) result(z)
    type(big), intent(in) :: x, y
    type(big) :: z
    z%v = x%v + y%v
    z%s = max(x%s, y%s)
  end function
  ! Concatenation of digit strings: associative, not commutative (16-byte
  ! derived type, returned in two integer registers).
  pure function catd(x, y) result(z)
    type(dg), intent(in) :: x, y
    type(dg) :: z
    z%v = x%v * y%p + y%v
    z%p = x%p * y%p
  end function
end module

program caf_coll_lib
  use coll_ops
  use iso_fortran_env, only: int8, int16, int32, int64, real32, real64, &
      real128, STAT_STOPPED_IMAGE
  implicit none
  integer, parameter :: i16 = selected_int_kind(30)
  integer :: me, n, nfail, r, k, i, st, rimg(3), it
  character(len=64) :: msg

  me = this_image()
  n = num_images()
  nfail = 0
  rimg = [0, 1, n]

  do k = 1, 3
    r = rimg(k)
    call t_sum(r)
    call t_minmax(r)
    call t_char(r)
    call t_reduce(r)
  end do
  call t_bcast()
  call t_noncontig()
  call t_errors()
  call t_loop()
  call t_big()

  sync all
  call co_sum(nfail)
  if (me == 1) then
    if (nfail == 0) then
      print '(a)', 'PASS caf_coll_lib'
    else
      print '(a,i0,a)', 'FAIL caf_coll_lib: ', nfail, ' failed checks'
    end if
  end if
  if (nfail /= 0) error stop 1

contains

  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    if (.not. ok) then
      nfail = nfail + 1
      print '(a,i0,a,a)', 'FAIL image ', me, ': ', what
    end if
  end subroutine

  logical function gets(r)
    integer, intent(in) :: r
    gets = r == 0 .or. r == me
  end function

  subroutine t_sum(r)
    integer, intent(in) :: r
    integer(int8) :: b1, b1a(3)
    integer(int16) :: b2
    integer(int32) :: b4, b4a(4,3)
    integer(int64) :: b8
    integer(i16) :: b16
    real(real32) :: f4
    real(real64) :: f8, f8a(7)
    real(real128) :: f16
    complex(real32) :: z4
    complex(real64) :: z8(2)
    complex(real128) :: z16
    integer :: tri, st
    character(len=20) :: em
    tri = n * (n + 1) / 2
    b1 = int(me, int8); b1a = int(me, int8)
    b2 = int(me, int16); b4 = me; b8 = me
    b4a = reshape([(me * i, i = 1, 12)], [4, 3])
    b16 = int(me, i16) * 10_i16**20
    f4 = real(me); f8 = me * 0.5d0; f8a = [(me + i * 0.25d0, i = 1, 7)]
    f16 = real(me, real128) / 3
    z4 = cmplx(me, -me, real32); z8 = cmplx(me, 2 * me, real64)
    z16 = cmplx(me, 1, real128)
    if (r == 0) then
      call co_sum(b1); call co_sum(b1a); call co_sum(b2)
      call co_sum(b4); call co_sum(b4a); call co_sum(b8); call co_sum(b16)
      call co_sum(f4); call co_sum(f8); call co_sum(f8a); call co_sum(f16)
      call co_sum(z4); call co_sum(z8)
      st = -1; em = 'x'
      call co_sum(z16, stat=st, errmsg=em)
      call check(st == 0, 'co_sum stat/errmsg on success')
    else
      call co_sum(b1, r); call co_sum(b1a, r); call co_sum(b2, r)
      call co_sum(b4, result_image=r); call co_sum(b4a, r); call co_sum(b8, r)
      call co_sum(b16, r)
      call co_sum(f4, r); call co_sum(f8, r); call co_sum(f8a, r)
      call co_sum(f16, r)
      call co_sum(z4, r); call co_sum(z8, r)
      st = -1
      call co_sum(z16, r, stat=st)
      call check(st == 0, 'co_sum stat on success (result_image)')
    end if
    if (.not. gets(r)) return
    call check(b1 == tri .and. all(b1a == tri), 'co_sum int8')
    call check(b2 == tri, 'co_sum int16')
    call check(b4 == tri, 'co_sum int32')
    call check(all(b4a == reshape([(tri * i, i = 1, 12)], [4, 3])), 'co_sum int32 2-d')
    call check(b8 == tri, 'co_sum int64')
    call check(b16 == int(tri, i16) * 10_i16**20, 'co_sum int128')
    call check(f4 == real(tri), 'co_sum real32')
    call check(f8 == tri * 0.5d0, 'co_sum real64')
    call check(all(abs(f8a - [(tri + n * i * 0.25d0, i = 1, 7)]) < 1d-12), 'co_sum real64 array')
    call check(abs(f16 - real(tri, real128) / 3) < 1e-30_real128, 'co_sum real128')
    call check(z4 == cmplx(tri, -tri, real32), 'co_sum complex32')
    call check(all(z8 == cmplx(tri, 2 * tri, real64)), 'co_sum complex64')
    call check(z16 == cmplx(tri, n, real128), 'co_sum complex128')
  end subroutine

  subroutine t_minmax(r)
    integer, intent(in) :: r
    integer(int8) :: b1(2)
    integer(int16) :: b2
    integer(int32) :: b4(3), c4(3)
    integer(int64) :: b8
    integer(i16) :: b16
    real(real32) :: f4
    real(real64) :: f8(2)
    real(real128) :: f16
    integer :: st
    b1 = [int(me, int8), int(-me, int8)]; b2 = int(-me, int16)
    b4 = [me, -me, 7]; c4 = b4; b8 = me * 1000000000_int64
    b16 = -int(me, i16) * 10_i16**25
    f4 = -real(me); f8 = [me * 1.5d0, -me * 1.5d0]; f16 = real(me, real128)
    if (r == 0) then
      call co_max(b1); call co_min(b2); call co_max(b4); call co_min(c4)
      call co_max(b8); call co_min(b16); call co_min(f4); call co_max(f8)
      st = 5
      call co_max(f16, stat=st)
      call check(st == 0, 'co_max stat')
    else
      call co_max(b1, r); call co_min(b2, r); call co_max(b4, r)
      call co_min(c4, r); call co_max(b8, r); call co_min(b16, r)
      call co_min(f4, r); call co_max(f8, r); call co_max(f16, r)
    end if
    if (.not. gets(r)) return
    call check(all(b1 == [int(n, int8), -1_int8]), 'co_max int8')
    call check(b2 == -n, 'co_min int16')
    call check(all(b4 == [n, -1, 7]) .and. all(c4 == [1, -n, 7]), 'co_max/co_min int32')
    call check(b8 == n * 1000000000_int64, 'co_max int64')
    call check(b16 == -int(n, i16) * 10_i16**25, 'co_min int128')
    call check(f4 == -real(n), 'co_min real32')
    call check(all(f8 == [n * 1.5d0, -1.5d0]), 'co_max real64')
    call check(f16 == real(n, real128), 'co_max real128')
  end subroutine

  subroutine t_char(r)
    integer, intent(in) :: r
    character(len=6) :: s, smax, sa(3), sb(3)
    character(len=3, kind=4) :: u
    integer :: st
    character(len=11) :: em
    ! image-dependent strings; trailing blanks must compare as padding
    write (s, '(a,i0)') 'k', mod(me * 7, 5)
    smax = s
    sa = [character(len=6) :: 'b', 'zz', s]
    sb = sa
    u = char(1000 + me, 4) // char(65, 4) // char(66, 4)
    if (r == 0) then
      call co_min(s); call co_max(smax, stat=st, errmsg=em)
      call check(st == 0, 'co_max character stat/errmsg')
      call co_max(sa); call co_min(sb)
      call co_max(u, stat=st, errmsg=em)
    else
      call co_min(s, r); call co_max(smax, r); call co_max(sa, r)
      call co_min(sb, r); call co_max(u, r)
    end if
    if (.not. gets(r)) return
    call check(s == exp_char(.true.), 'co_min character')
    call check(smax == exp_char(.false.), 'co_max character')
    call check(sa(1) == 'b' .and. sa(2) == 'zz' .and. sa(3) == exp_char(.false.), 'co_max character array')
    call check(sb(3) == exp_char(.true.), 'co_min character array')
    call check(u == char(1000 + n, 4) // char(65, 4) // char(66, 4), 'co_max character kind=4')
  end subroutine

  character(len=6) function exp_char(lo)
    logical, intent(in) :: lo
    character(len=6) :: t
    integer :: j
    write (exp_char, '(a,i0)') 'k', mod(7, 5)
    do j = 2, n
      write (t, '(a,i0)') 'k', mod(j * 7, 5)
      if (lo .and. t < exp_char) exp_char = t
      if (.not. lo .and. t > exp_char) exp_char = t
    end do
  end function

  subroutine t_reduce(r)
    integer, intent(in) :: r
    integer :: i4, ia(5)
    integer(int64) :: i8
    type(dg) :: d
    integer :: st
    character(len=9) :: em
    real(real64) :: p
    character(len=4) :: c, ca(2), ce
    type(pt) :: q
    type(big) :: g
    integer :: j
    i4 = me; ia = [(me * j, j = 1, 5)]; i8 = me; p = 2d0
    write (c, '(a,i3.3)') 'c', me
    ca = [c, 'zzzz']
    q = pt(me, 0.5 * me)
    g%v = [(int(me, int64) * j, j = 1, 5)]; g%s = achar(96 + me)
    d = dg(mod(me, 10), 10)
    if (r == 0) then
      call co_reduce(i4, addi); call co_reduce(ia, addi)
      call co_reduce(i8, addi8v); call co_reduce(p, mulr)
      call co_reduce(c, cmaxf, stat=st, errmsg=em)
      call check(st == 0, 'co_reduce character stat/errmsg')
      call co_reduce(ca, cmaxf)
      call co_reduce(q, addp); call co_reduce(g, addbig)
      call co_reduce(d, catd)
    else
      call co_reduce(i4, addi, r); call co_reduce(ia, addi, result_image=r)
      call co_reduce(i8, addi8v, r); call co_reduce(p, mulr, r)
      call co_reduce(c, cmaxf, r, stat=st, errmsg=em)
      call check(st == 0, 'co_reduce character stat/errmsg (result_image)')
      call co_reduce(ca, cmaxf, r)
      call co_reduce(q, addp, r); call co_reduce(g, addbig, r)
      call co_reduce(d, catd, r)
    end if
    if (.not. gets(r)) return
    call check(i4 == n * (n + 1) / 2, 'co_reduce integer')
    call check(all(ia == [(j * n * (n + 1) / 2, j = 1, 5)]), 'co_reduce integer array')
    call check(i8 == n * (n + 1) / 2, 'co_reduce integer(8) VALUE')
    call check(p == 2d0**n, 'co_reduce real')
    write (ce, '(a,i3.3)') 'c', n
    call check(ca(1) == ce .and. ca(2) == 'zzzz', 'co_reduce character array')
    call check(c == ce, 'co_reduce character')
    call check(q%a == n * (n + 1) / 2 .and. q%b == 0.25 * n * (n + 1), 'co_reduce derived (8 bytes)')
    call check(all(g%v == [(int(n * (n + 1) / 2, int64) * j, j = 1, 5)]) .and. &
               g%s == achar(96 + n), 'co_reduce derived (48 bytes)')
    ! the operation is not commutative: result in image order from image 1
    ! (library choice, the standard leaves the order processor dependent)
    if (r <= 1 .and. n <= 9) call check(d%v == exp_cat() .and. d%p == 10_int64**n, &
                                        'co_reduce order')
  end subroutine

  integer(int64) function exp_cat()
    integer :: j
    exp_cat = 1
    do j = 2, n
      exp_cat = exp_cat * 10 + j
    end do
  end function

  subroutine t_bcast()
    integer :: a(4, 3), src, j
    real(10) :: x10
    complex(real64) :: z
    character(len=5) :: s(2)
    type(pt) :: q(3)
    type(big) :: g
    integer :: st, srcs(3)
    character(len=30) :: em
    srcs = [1, n, (n + 1) / 2]
    do j = 1, 3
      src = srcs(j)
      a = me * 100 + reshape([(i, i = 1, 12)], [4, 3])
      x10 = me / 3.0_10; z = cmplx(me, me, real64)
      write (s(1), '(a,i0)') 'img', me; s(2) = 'same'
      q = pt(me, -me); g%v = me; g%s = 'abc'
      call co_broadcast(a, src)
      call co_broadcast(x10, source_image=src)
      call co_broadcast(z, src); call co_broadcast(s, src)
      call co_broadcast(q, src)
      st = 9; em = ''
      call co_broadcast(g, src, stat=st, errmsg=em)
      call check(st == 0, 'co_broadcast stat')
      call check(all(a == src * 100 + reshape([(i, i = 1, 12)], [4, 3])), 'co_broadcast integer 2-d')
      call check(x10 == src / 3.0_10, 'co_broadcast real(10)')
      call check(z == cmplx(src, src, real64), 'co_broadcast complex')
      write (em, '(a,i0)') 'img', src
      call check(s(1) == em(1:5) .and. s(2) == 'same', 'co_broadcast character')
      call check(all(q%a == src) .and. all(q%b == -src), 'co_broadcast derived array')
      call check(all(g%v == src) .and. g%s == 'abc', 'co_broadcast derived')
    end do
  end subroutine

  subroutine t_noncontig()
    integer :: a(10), b(4, 6), j, tri
    real(real64) :: x(9)
    type(pt) :: q(4)
    tri = n * (n + 1) / 2
    a = me; b = me; x = me; q = pt(me, 1.0)
    call co_sum(a(1:10:2))
    call check(all(a(1:10:2) == tri) .and. all(a(2:10:2) == me), 'co_sum a(1:n:2)')
    call co_max(b(2:3, 1:6:3), result_image=n)
    if (me == n) call check(all(b(2:3, 1:6:3) == n) .and. b(1, 1) == me .and. &
                            b(2, 2) == me, 'co_max 2-d section')
    call co_broadcast(x(9:1:-2), n)
    call check(all(x(9:1:-2) == n) .and. all(x(8:2:-2) == me), 'co_broadcast negative stride')
    ! co_sum(q%a) is not tested: gfortran 12 passes the descriptor of q
    ! (type derived, elem_len 8, base &q(1)) instead of one of q%a.
    b = me
    call co_reduce(b(1, :), addi)
    call check(all(b(1, :) == tri) .and. all(b(2:, :) == me), 'co_reduce row section')
  end subroutine

  subroutine t_errors()
    integer :: x, st
    character(len=40) :: em
    x = 1
    st = 0; em = ''
    call co_sum(x, result_image=n + 1, stat=st, errmsg=em)
    ! (gfortran 12 passes ERRMSG= of co_* by value: it cannot be set)
    call check(st /= 0, 'co_sum result_image out of range -> stat')
    st = 0
    call co_broadcast(x, 0, stat=st)
    call check(st /= 0, 'co_broadcast source_image 0 -> stat')
    st = 0; em = 'unchanged'
    call co_min(x, result_image=-1, stat=st, errmsg=em)
    call check(st /= 0, 'co_min result_image -1 -> stat')
    ! the library still works after the refused calls
    x = 1
    call co_sum(x)
    call check(x == n, 'co_sum after errors')
  end subroutine

  subroutine t_loop()
    integer :: v(37), j, root, w
    integer(int64) :: s
    real(real64) :: y(3000)
    do it = 1, 300
      root = mod(it, n) + 1
      select case (mod(it, 4))
      case (0)
        v = me + it
        call co_sum(v, result_image=root)
        if (me == root) call check(all(v == n * it + n * (n + 1) / 2), 'loop co_sum root')
      case (1)
        s = me * it
        call co_max(s)
        call check(s == n * it, 'loop co_max all')
      case (2)
        w = me * 1000 + it
        call co_broadcast(w, root)
        call check(w == root * 1000 + it, 'loop co_broadcast')
      case (3)
        y = me + it
        if (mod(it, 8) == 3) then
          call co_sum(y(1:3000:it/100 + 1), result_image=root)
          if (me == root) call check(all(y(1:3000:it/100 + 1) == n * it + n * (n + 1) / 2), 'loop co_sum big')
        else
          call co_min(y)
          call check(all(y == 1 + it), 'loop co_min big')
        end if
      end select
    end do
  end subroutine

  subroutine t_big()
    integer(int64), allocatable :: h(:)
    integer :: m, j
    m = 131072 * 3 + 17  ! 3 MiB + a bit of integer(8): several chunks
    allocate (h(m))
    h = [(int(j, int64) * me, j = 1, m)]
    call co_sum(h)
    call check(all(h == [(int(j, int64) * (n * (n + 1) / 2), j = 1, m)]), 'co_sum 3 MiB integer(8)')
    h = [(int(j, int64) + me, j = 1, m)]
    call co_sum(h, result_image=n)
    if (me == n) call check(all(h == [(n * int(j, int64) + n * (n + 1) / 2, j = 1, m)]), &
                            'co_sum 3 MiB result_image')
    h = me
    call co_broadcast(h(1:m:3), n)
    call check(all(h(1:m:3) == n) .and. all(h(2:m:3) == me), 'co_broadcast big section')
  end subroutine
end program
