! caf_ref_unalloc_stat: a coindexed read through an allocatable component
! that is not allocated on the target image, with STAT= in the image
! selector (F2018; gfortran 12 passes it to get_by_ref): STAT= is nonzero
! and the program goes on; a subscript outside the remote bounds likewise;
! a good read sets STAT= to 0.  Both errors are program errors the
! standard does not require a processor to detect; libcaf_firehose reports
! them (OpenCoarrays 2.10 sets STAT= for the unallocated component but
! aborts in MPI_Get on the subscript out of bounds).
program caf_ref_unalloc_stat
  implicit none
  type t
    integer, allocatable :: a(:)
  end type
  type(t) :: x[*]
  integer :: me, np, p, s, v(2)
  logical :: ok

  me = this_image()
  np = num_images()
  p = mod(me, np) + 1
  ok = .true.
  if (mod(me, 2) == 0) allocate(x%a(4), source=[1, 2, 3, 4] * me)
  sync all

  v = -7
  s = -1
  v = x[p, stat=s]%a(1:2)
  if (mod(p, 2) == 0) then
    call check(s == 0 .and. all(v == [p, 2 * p]), 'allocated: stat 0 and values')
  else
    call check(s /= 0, 'not allocated: stat nonzero')
  end if
  if (mod(p, 2) == 0) then
    s = 0
    v(1:2) = x[p, stat=s]%a(3:4) + x[p, stat=s]%a(4:5)
    call check(s /= 0, 'out of bounds: stat nonzero')
  end if
  sync all
  if (.not. ok) error stop 1
  if (me == 1) write (*, '(a)') 'PASS caf_ref_unalloc_stat'
contains
  subroutine check(cond, what)
    logical, intent(in) :: cond
    character(*), intent(in) :: what
    if (.not. cond) then
      write (*, '(a,i0,2a)') 'FAIL image ', me, ': ', what
      ok = .false.
    end if
  end subroutine
end program
