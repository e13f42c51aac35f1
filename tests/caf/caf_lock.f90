! caf_lock.f90 -- LOCK/UNLOCK and CRITICAL.
!
! Checks:
!  * lock/unlock on a scalar lock_type coarray protecting a non-atomic
!    read-modify-write (get, add, put) of a counter on image 1, done by all
!    images many times: the exact final count;
!  * the same with an array of locks (lks(k)[1] protects counters(k)[1]);
!  * lock(..., acquired_lock=) retry loops (exact count again);
!  * stat= cases: locking a lock this image already holds -> STAT_LOCKED,
!    unlocking a lock held by another image -> STAT_LOCKED_OTHER_IMAGE,
!    unlocking an unlocked lock -> STAT_UNLOCKED; stat = 0 otherwise;
!  * a CRITICAL construct around a remote read-modify-write, hammered by
!    all images (exact count).
!
! OpenCoarrays 2.10.1 passes the counting parts but gets the stat= cases
! wrong: locking a lock this image holds gives stat=99 (not STAT_LOCKED);
! on >= 2 images, lock(own, acquired_lock=, stat=) on a held lock
! reports success on one image, unlocking a lock held by image 1 from
! image 2 gives stat=0 (not STAT_LOCKED_OTHER_IMAGE), and image 2's
! lock(shared[1], acquired_lock=got) returns got=.true. while image 1
! holds the lock.  (gfortran -fcoarray=single, too, ignores the stat= cases.)
!
! Prints "PASS caf_lock" on image 1 on success; otherwise
! "FAIL caf_lock image <i>: ..." and error stop 1.  Any image count (the
! "held by another image" case needs two images).
program caf_lock
  use iso_fortran_env, only: lock_type, stat_locked, stat_locked_other_image, stat_unlocked
  implicit none
  character(*), parameter :: test_name = 'caf_lock'
  integer, parameter :: niter = 100, ntries = 50
  type(lock_type) :: lk[*], lks(3)[*], own[*], shared[*]
  integer :: counter[*], counters(3)[*], crit_count[*], try_count[*]
  integer :: me, n, i, k, tmp, st, attempts
  integer :: mine(3)
  logical :: got

  me = this_image()
  n = num_images()
  counter = 0
  counters = 0
  crit_count = 0
  try_count = 0
  sync all

  ! ---- scalar lock ------------------------------------------------------
  do i = 1, niter
    lock (lk[1])
    tmp = counter[1]
    counter[1] = tmp + 1
    unlock (lk[1])
  end do
  sync all
  if (me == 1) call check_i(counter, niter * n, 'counter protected by lock(lk[1])')

  ! ---- array of locks --------------------------------------------------
  mine = 0
  do i = 1, niter
    k = mod(i + me, 3) + 1
    lock (lks(k)[1], stat=st)
    call check_i(st, 0, 'lock(lks(k)[1], stat=) on success')
    tmp = counters(k)[1]
    counters(k)[1] = tmp + me
    unlock (lks(k)[1], stat=st)
    call check_i(st, 0, 'unlock(lks(k)[1], stat=) on success')
    mine(k) = mine(k) + me
  end do
  call co_sum(mine)
  sync all
  if (me == 1) then
    do k = 1, 3
      call check_i(counters(k), mine(k), 'counter protected by lks(k)[1]')
    end do
  end if

  ! ---- acquired_lock= ----------------------------------------------------
  attempts = 0
  i = 0
  do while (i < ntries)
    lock (lk[n], acquired_lock=got)
    attempts = attempts + 1
    if (got) then
      tmp = try_count[n]
      try_count[n] = tmp + 1
      unlock (lk[n])
      i = i + 1
    end if
  end do
  sync all
  if (me == n) call check_i(try_count, ntries * n, 'counter protected by lock(acquired_lock=)')
  call check(attempts >= ntries, 'acquired_lock attempts >= successes')

  ! ---- stat= cases ------------------------------------------------------
  lock (own)
  lock (own, stat=st)
  call check_i(st, stat_locked, 'lock of a lock I hold gives STAT_LOCKED')
  lock (own, acquired_lock=got, stat=st)
  call check(.not. got .or. st /= 0, 'acquired_lock= on a lock I hold is not acquired')
  unlock (own, stat=st)
  call check_i(st, 0, 'unlock of my lock')
  unlock (own, stat=st)
  call check_i(st, stat_unlocked, 'unlock of an unlocked lock gives STAT_UNLOCKED')
  ! Every image is done with its own lock before anyone unlocks a
  ! neighbour's (else it may be held: STAT_LOCKED_OTHER_IMAGE).
  sync all
  unlock (own[modulo(me, n) + 1], stat=st)
  call check_i(st, stat_unlocked, 'unlock of an unlocked remote lock gives STAT_UNLOCKED')
  sync all
  if (n >= 2) then
    if (me == 1) lock (shared[1])
    sync all
    if (me == 2) then
      unlock (shared[1], stat=st)
      call check_i(st, stat_locked_other_image, 'unlock of a lock held by image 1 gives STAT_LOCKED_OTHER_IMAGE')
      lock (shared[1], acquired_lock=got)
      call check(.not. got, 'acquired_lock= on a lock held by image 1')
    end if
    sync all
    if (me == 1) unlock (shared[1])
    sync all
    if (me == 2) then
      lock (shared[1], acquired_lock=got)
      call check(got, 'acquired_lock= on the released lock')
      unlock (shared[1])
    end if
  end if
  sync all

  ! ---- critical -----------------------------------------------------------
  do i = 1, niter
    critical
      tmp = crit_count[1]
      crit_count[1] = tmp + 1
    end critical
  end do
  sync all
  if (me == 1) call check_i(crit_count, niter * n, 'counter protected by critical')

  sync all
  if (me == 1) write(*, '(a)') 'PASS caf_lock'

contains

  include 'caf_check.inc'

end program caf_lock
