! caf_coll_big.f90 -- collectives over several chunks, images that run
! ahead, and a stopped image.
!
! The collectives cut arrays into chunks (1 MiB slots on the node path,
! 512 KiB on the message path) and reuse each image's slots every other
! chunk; an image that is not the result image may run ahead.  Checks, on
! any image count (odd ones included):
!  * co_sum of 320000 elements (2.5 MB, 3 node chunks, 5 message ones)
!    for every image as result and for all images, co_reduce, co_max and
!    co_min of it, exact values (small integers in real(8));
!  * co_broadcast of 2.5 MB from every image;
!  * 20 rounds of back-to-back reductions to one rotating RESULT_IMAGE,
!    large and small alternating, without synchronization between them
!    (the non-result images run ahead and rewrite their slots: a slot
!    reused too early gives wrong sums);
!  * the same sum in real(4), integer(1) (wrapping) and complex(8);
!  * last: the last image stops; the others' co_sum(stat=) then gives
!    STAT_STOPPED_IMAGE (2 images or more).
! ALSO-ENV: FH_SHM=off
! (runs also with it: the message path; as is, on one machine, the node path)
! ALSO-ENV: FH_SHM=off FH_OFI_PROVIDER=shm
! (the message path over libfabric's shm provider, which reads a put's source
! after fh_put_nb returned -- the net provider copies it into the socket at
! once --, so an array changed while its chunk is in flight shows there: two
! images exchange their whole array and combine into it, caf_coll_tree.c)
! Prints "PASS caf_coll_big" on image 1; otherwise "FAIL caf_coll_big image
! <i>: ..." and error stop 1.
module caf_coll_big_ops
  implicit none
contains
  pure function add_r8(x, y) result(z)
    real(8), intent(in) :: x, y
    real(8) :: z
    z = x + y
  end function add_r8
end module caf_coll_big_ops

program caf_coll_big
  use, intrinsic :: iso_fortran_env, only: stat_stopped_image
  use caf_coll_big_ops
  implicit none
  integer, parameter :: m = 320000
  real(8), allocatable :: a(:), want(:)
  real(4) :: r4(1000)
  integer(1) :: i1(5000)
  complex(8) :: z8(70000)
  integer :: me, n, r, i, k, st, errs
  real(8) :: x

  me = this_image()
  n = num_images()
  errs = 0
  allocate (a(m), want(m))

  ! Element i of image j: j + mod(i, 7).  Sum: n(n+1)/2 + n*mod(i, 7).
  want = [(real(n * (n + 1) / 2 + n * mod(i, 7), 8), i = 1, m)]
  do r = 0, n
    call fill()
    if (r == 0) then
      call co_sum(a)
    else
      call co_sum(a, result_image=r)
    end if
    if (r == 0 .or. r == me) call check(all(a == want), 'co_sum 2.5 MB')
  end do
  call fill()
  call co_reduce(a, add_r8, result_image=n)
  if (me == n) call check(all(a == want), 'co_reduce 2.5 MB')
  call fill()
  call co_max(a)
  call check(all(a == [(real(n + mod(i, 7), 8), i = 1, m)]), 'co_max 2.5 MB')
  call fill()
  call co_min(a, result_image=n)
  if (me == n) call check(all(a == [(real(1 + mod(i, 7), 8), i = 1, m)]), 'co_min 2.5 MB')

  do r = 1, n
    a = -1
    if (me == r) a = [(real(i + r, 8), i = 1, m)]
    call co_broadcast(a, r)
    call check(all(a == [(real(i + r, 8), i = 1, m)]), 'co_broadcast 2.5 MB')
  end do

  ! Running ahead: no synchronization between the rounds.
  do k = 1, 20
    r = 1 + mod(k, n)
    call fill()
    call co_sum(a, result_image=r)
    if (me == r) call check(all(a == want), 'running ahead: large co_sum')
    x = me * k
    call co_sum(x, result_image=r)
    if (me == r) call check(x == k * n * (n + 1) / 2, 'running ahead: small co_sum')
  end do

  r4 = [(real(me + mod(i, 3), 4), i = 1, 1000)]
  call co_sum(r4)
  call check(all(r4 == [(real(n * (n + 1) / 2 + n * mod(i, 3), 4), i = 1, 1000)]), &
             'co_sum real(4)')
  i1 = int(100, 1)
  call co_sum(i1)
  call check(all(i1 == int(modulo(100 * n + 128, 256) - 128, 1)), 'co_sum integer(1) wraps')
  z8 = cmplx(me, -me, 8)
  call co_sum(z8, result_image=1)
  if (me == 1) call check(all(z8 == cmplx(n * (n + 1) / 2, -n * (n + 1) / 2, 8)), &
                          'co_sum complex(8) 1.1 MB')

  call co_sum(errs)
  if (errs /= 0) error stop 1
  if (n >= 2) then
    sync all
    if (me == n) stop
    x = 1
    st = -1
    call co_sum(x, stat=st)
    call check(st == stat_stopped_image, 'co_sum with a stopped image: STAT_STOPPED_IMAGE')
    a = 1
    st = -1
    call co_sum(a, stat=st)
    call check(st == stat_stopped_image, 'large co_sum with a stopped image: STAT_STOPPED_IMAGE')
    if (errs /= 0) error stop 1
    sync all (stat=st)
  end if
  if (me == 1) write (*, '(a)') 'PASS caf_coll_big'

contains

  subroutine fill()
    integer :: i
    a = [(real(me + mod(i, 7), 8), i = 1, m)]
  end subroutine fill

  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(*), intent(in) :: what
    if (.not. ok) then
      errs = errs + 1
      write (*, '(a,i0,a)') 'FAIL caf_coll_big image ', this_image(), ': ' // what
    end if
  end subroutine check
end program caf_coll_big
