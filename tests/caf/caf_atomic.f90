! caf_atomic.f90 -- atomic subroutines.
!
! Checks atomic_define/atomic_ref on integer(atomic_int_kind) and
! logical(atomic_logical_kind) coarrays; atomic_add/and/or/xor and the
! atomic_fetch_* variants; atomic_cas (a compare-and-swap increment loop).
! All images (image 1 included, so the owner's own atomics must be atomic
! with the remote ones) hammer image 1's variables and their neighbour's,
! and the exact final values are checked; fetch_add tickets must be unique.
!
! OpenCoarrays 2.10.1 fails: the atomic_fetch_* variants return garbage
! in OLD, and atomic_and/or/xor (and their fetch variants) print "the
! atomic operation requested for MPI < 3 is not yet implemented" and do
! nothing.  atomic_define/ref/add/cas and the logical atomics pass.
!
! Prints "PASS caf_atomic" on image 1 on success; otherwise
! "FAIL caf_atomic image <i>: ..." and error stop 1.  Any image count
! (the bit-mask part uses bits 0..29, so images beyond 30 share bits).
program caf_atomic
  use iso_fortran_env, only: atomic_int_kind, atomic_logical_kind
  implicit none
  integer, parameter :: niter = 200
  integer(atomic_int_kind) :: counter[*], neighbour[*], tickets[*], bits[*], toggles[*], cas_cnt[*]
  logical(atomic_logical_kind) :: go[*]
  integer(atomic_int_kind) :: old, got, seen, mybit, expected_bits, ticket_sum[*]
  logical(atomic_logical_kind) :: lval
  integer :: me, n, right, left, i, total
  integer(8) :: sum_old

  me = this_image()
  n = num_images()
  right = modulo(me, n) + 1
  left = modulo(me - 2, n) + 1
  mybit = int(2**mod(me - 1, 30), atomic_int_kind)

  call atomic_define(counter, 0)
  call atomic_define(neighbour, 0)
  call atomic_define(tickets, 0)
  call atomic_define(bits, 0)
  call atomic_define(toggles, 0)
  call atomic_define(cas_cnt, 0)
  call atomic_define(go, .false.)
  sync all

  ! ---- atomic_add from everybody on image 1 and on the right neighbour --
  do i = 1, niter
    call atomic_add(counter[1], 1)
    call atomic_add(neighbour[right], 2)
    if (me == 1) call atomic_add(counter, 1)        ! the owner, non-coindexed
  end do
  sync all
  call atomic_ref(got, neighbour)
  call check_i(got, int(2 * niter, atomic_int_kind), 'atomic_add on the neighbour')
  if (me == 1) then
    call atomic_ref(got, counter[1])
    call check_i(got, int(niter * (n + 1), atomic_int_kind), 'atomic_add on image 1 (incl. owner)')
  end if

  ! ---- atomic_fetch_add tickets must be unique ---------------------------
  sum_old = 0
  do i = 1, niter
    call atomic_fetch_add(tickets[1], 1, old)
    if (old < 0 .or. old >= niter * n) call check_i(old, -1_atomic_int_kind, 'fetch_add ticket out of range')
    sum_old = sum_old + old
  end do
  call co_sum(sum_old)
  total = niter * n
  if (sum_old /= int(total, 8) * (total - 1) / 2) &
    call check_i(int(sum_old, atomic_int_kind), int(int(total, 8) * (total - 1) / 2, atomic_int_kind), &
                 'sum of fetch_add tickets (duplicates or lost updates)')
  if (me == 1) then
    call atomic_ref(got, tickets)
    call check_i(got, int(total, atomic_int_kind), 'final fetch_add counter')
  end if
  sync all

  ! ---- or / and / xor and their fetch variants -------------------------
  call atomic_or(bits[1], mybit)
  sync all
  expected_bits = 0
  do i = 1, n
    expected_bits = ior(expected_bits, int(2**mod(i - 1, 30), atomic_int_kind))
  end do
  call atomic_ref(got, bits[1])
  call check_i(got, expected_bits, 'atomic_or of every image bit')
  sync all
  ! odd images clear their bit with atomic_fetch_and: the old value must
  ! still contain the bit
  if (mod(me, 2) == 1) then
    call atomic_fetch_and(bits[1], not(mybit), old)
    if (iand(old, mybit) == 0 .and. me <= 30) call check_i(old, expected_bits, 'fetch_and old value lost my bit')
  end if
  sync all
  call atomic_ref(got, bits[1])
  expected_bits = 0
  do i = 2, min(n, 30), 2
    expected_bits = ior(expected_bits, int(2**(i - 1), atomic_int_kind))
  end do
  if (n <= 30) call check_i(got, expected_bits, 'atomic_fetch_and cleared the odd images bits')
  sync all
  ! atomic_and with all ones leaves the value; atomic_fetch_or puts the bits back
  call atomic_and(bits[1], -1_atomic_int_kind)
  call atomic_fetch_or(bits[1], mybit, old)
  sync all
  ! xor: every image toggles its bit (2*me + 1) times on image 1 and the
  ! owner toggles bit 30 niter times
  do i = 1, 2 * me + 1
    if (mod(i, 2) == 0) then
      call atomic_xor(toggles[1], mybit)
    else
      call atomic_fetch_xor(toggles[1], mybit, old)
    end if
  end do
  if (me == 1) then
    do i = 1, niter
      call atomic_xor(toggles, int(2**30, atomic_int_kind))
    end do
  end if
  sync all
  if (me == 1 .and. n <= 30) then
    call atomic_ref(got, bits)
    call check_i(got, int(2**n - 1, atomic_int_kind), 'atomic_fetch_or restored every bit')
    call atomic_ref(got, toggles)
    call check_i(got, int(2**n - 1, atomic_int_kind), 'atomic_xor/atomic_fetch_xor toggles')
  end if
  sync all

  ! ---- atomic_cas increment loop ----------------------------------------
  do i = 1, niter
    call atomic_ref(seen, cas_cnt[1])
    do
      call atomic_cas(cas_cnt[1], old, seen, seen + 1)
      if (old == seen) exit
      seen = old
    end do
  end do
  ! a failing CAS must not change the value
  call atomic_cas(cas_cnt[right], old, -12345_atomic_int_kind, 999_atomic_int_kind)
  call check(old /= -12345, 'atomic_cas with a wrong compare value returned it')
  sync all
  if (me == 1) then
    call atomic_ref(got, cas_cnt)
    call check_i(got, int(niter * n, atomic_int_kind), 'atomic_cas increments')
  end if
  sync all

  ! ---- logical atomics: a release flag -------------------------------------
  ticket_sum = me * 7
  sync all
  if (me == 1) then
    do i = n, 1, -1
      call atomic_define(go[i], .true.)
    end do
  end if
  do
    call atomic_ref(lval, go)
    if (lval) exit
  end do
  call check(lval, 'logical atomic_ref sees .true.')
  call atomic_ref(got, ticket_sum[left])
  call check_i(got, int(left * 7, atomic_int_kind), 'atomic_ref on an integer coarray set before sync all')
  sync all
  call atomic_define(go[right], .false.)
  sync all
  call atomic_ref(lval, go)
  call check(.not. lval, 'logical atomic_define .false. from the neighbour')

  sync all
  if (me == 1) write(*, '(a)') 'PASS caf_atomic'

contains

  subroutine check(cond, what)
    logical, intent(in) :: cond
    character(*), intent(in) :: what
    if (.not. cond) then
      write(*, '(a,i0,a)') 'FAIL caf_atomic image ', this_image(), ': ' // what
      error stop 1
    end if
  end subroutine check

  subroutine check_i(gotv, expected, what)
    integer(atomic_int_kind), intent(in) :: gotv, expected
    character(*), intent(in) :: what
    character(len=80) :: buf
    if (gotv /= expected) then
      write(buf, '(a,i0,a,i0)') ', expected ', expected, ', got ', gotv
      call check(.false., what // trim(buf))
    end if
  end subroutine check_i

end program caf_atomic
