! LOCK/UNLOCK protecting a non-atomic read-modify-write of a coarray on
! image 1 (exact count), try-lock, the STAT cases, CRITICAL hammering.
program caf_lock_lib
  use iso_fortran_env
  implicit none
  integer, parameter :: iters = 100
  type(lock_type) :: lk[*], lks(3)[*]
  integer :: total[*], crit[*], bad[*]
  integer :: me, n, i, st, v
  logical :: got
  character(len=80) :: msg
  me = this_image(); n = num_images(); bad = 0
  total = 0; crit = 0
  sync all
  ! 1. lock on image 1 around get + put of image 1's counter
  do i = 1, iters
    lock(lk[1])
    v = total[1]
    total[1] = v + 1
    unlock(lk[1])
  end do
  sync all  ! part 2 updates total[1] under another lock
  ! 2. an element of a lock array on another image
  do i = 1, iters
    lock(lks(2)[1 + mod(me, n)])
    v = total[1 + mod(me, n)]
    total[1 + mod(me, n)] = v + 1
    unlock(lks(2)[1 + mod(me, n)])
  end do
  ! 3. CRITICAL
  do i = 1, iters
    critical
      v = crit[1]
      crit[1] = v + 1
    end critical
  end do
  sync all
  if (me == 1 .and. total /= n*iters + iters) call fail('lock count', total)
  if (me == 1 .and. crit /= n*iters) call fail('critical count', crit)
  sync all
  ! 4. STAT cases
  lock(lks(1), stat=st)
  if (st /= 0) call fail('lock stat', st)
  lock(lks(1), stat=st, errmsg=msg)
  if (st /= STAT_LOCKED) call fail('STAT_LOCKED', st)
  unlock(lks(1), stat=st)
  if (st /= 0) call fail('unlock stat', st)
  msg = ''
  unlock(lks(1), stat=st, errmsg=msg)
  ! gfortran 12's STAT_UNLOCKED is 0: the message tells the cases apart
  if (st /= STAT_UNLOCKED .or. msg == '') call fail('STAT_UNLOCKED', st)
  sync all
  if (n >= 2) then
    if (me == 2) lock(lks(3)[1])
    sync all
    if (me == 1) then
      unlock(lks(3), stat=st)
      if (st /= STAT_LOCKED_OTHER_IMAGE) call fail('STAT_LOCKED_OTHER_IMAGE', st)
      ! try-lock fails while image 2 holds it
      lock(lks(3), acquired_lock=got, stat=st)
      if (got .or. st /= 0) call fail('try-lock held', st)
    end if
    sync all
    if (me == 2) unlock(lks(3)[1])
    sync all
    if (me == 1) then
      lock(lks(3), acquired_lock=got)
      if (.not. got) call fail('try-lock free', 0)
      unlock(lks(3))
    end if
  end if
  sync all
  if (bad /= 0) error stop 1
  sync all
  if (me == 1) print '(a)', 'PASS caf_lock_lib'
contains
  subroutine fail(what, val)
    character(*), intent(in) :: what
    integer, intent(in) :: val
    print *, 'FAIL caf_lock_lib: image', this_image(), what, val
    error stop 1
  end subroutine
end program
