! Atomic subroutines hammered by every image on image 1's variables and on
! each other's; exact final values.  gfortran 12 accepts only
! ATOMIC_INT_KIND / ATOMIC_LOGICAL_KIND (4 bytes) in atomic intrinsics, so
! kind 8 is not reachable from Fortran.
program caf_atomic_lib
  use iso_fortran_env
  implicit none
  integer, parameter :: iters = 200
  integer(atomic_int_kind) :: cnt[*], fcnt[*], bits[*], xr[*], cs[*], pair(2)[*]
  integer(atomic_int_kind) :: old, v, seen
  logical(atomic_logical_kind) :: flag[*]
  logical :: lv
  integer :: me, n, i, right, bad
  integer(atomic_int_kind), allocatable :: got(:)
  me = this_image(); n = num_images(); bad = 0
  call atomic_define(cnt, 0); call atomic_define(fcnt, 0)
  call atomic_define(bits, 0); call atomic_define(xr, 0); call atomic_define(cs, 0)
  call atomic_define(pair(1), 0); call atomic_define(pair(2), 0)
  call atomic_define(flag, .false.)
  sync all
  allocate(got(iters))
  right = 1 + mod(me, n)
  do i = 1, iters
    call atomic_add(cnt[1], 1)
    call atomic_fetch_add(fcnt[1], 2, old)
    got(i) = old
    call atomic_add(pair(2)[right], -3)      ! upper half of a 64-bit word
    call atomic_add(pair(1)[right], 5)       ! lower half: carries must not leak
    call atomic_xor(xr[1], int(ishft(1, mod(me-1, 31)), atomic_int_kind))
    ! CAS increment loop
    do
      call atomic_ref(v, cs[1])
      call atomic_cas(cs[1], seen, v, v + 1)
      if (seen == v) exit
    end do
  end do
  call atomic_or(bits[1], int(ishft(1, mod(me-1, 31)), atomic_int_kind))
  call atomic_fetch_or(bits[right], int(ishft(1, 20), atomic_int_kind), old)
  call atomic_fetch_and(bits[right], not(int(ishft(1, 20), atomic_int_kind)), old)
  if (iand(old, int(ishft(1, 20), atomic_int_kind)) == 0) bad = bad + 1
  call atomic_and(xr[me], -1)
  call atomic_define(flag[right], .true.)
  ! fetched values are even and distinct per image (monotone)
  do i = 2, iters
    if (got(i) <= got(i-1) .or. mod(got(i), 2) /= 0) bad = bad + 1
  end do
  sync all
  call atomic_ref(lv, flag)
  if (.not. lv) bad = bad + 1
  call atomic_ref(v, pair(1)); if (v /= 5*iters) bad = bad + 1
  call atomic_ref(v, pair(2)); if (v /= -3*iters) bad = bad + 1
  if (me == 1) then
    call atomic_ref(v, cnt); if (v /= n*iters) then; print *, 'cnt', v; bad = bad + 1; end if
    call atomic_ref(v, fcnt); if (v /= 2*n*iters) then; print *, 'fcnt', v; bad = bad + 1; end if
    call atomic_ref(v, cs); if (v /= n*iters) then; print *, 'cas', v; bad = bad + 1; end if
    call atomic_ref(v, xr)
    ! each image xors its bit iters (even) times: 0
    if (v /= 0) then; print *, 'xor', v; bad = bad + 1; end if
    call atomic_ref(v, bits)
    if (v /= expect_bits(n)) then; print *, 'bits', v; bad = bad + 1; end if
  end if
  call co_sum_int(bad)
  if (me == 1) then
    if (bad /= 0) then
      print *, 'FAIL caf_atomic_lib', bad
      error stop 1
    end if
    print '(a)', 'PASS caf_atomic_lib'
  end if
contains
  integer(atomic_int_kind) function expect_bits(n)
    integer, intent(in) :: n
    integer :: k
    expect_bits = 0
    do k = 1, n
      expect_bits = ior(expect_bits, int(ishft(1, mod(k-1, 31)), atomic_int_kind))
    end do
  end function
  ! sum over images without co_sum (collectives are another file's job)
  subroutine co_sum_int(x)
    integer, intent(inout) :: x
    integer(atomic_int_kind), save :: acc[*]
    integer(atomic_int_kind) :: t
    call atomic_add(acc[1], int(x, atomic_int_kind))
    sync all
    if (this_image() == 1) then
      call atomic_ref(t, acc); x = t
    end if
  end subroutine
end program
