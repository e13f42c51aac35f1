! caf_imagecost.f90 -- what an empty coarray image costs: resident memory.
!
!   cafrun -n P ./caf_imagecost [--quick]
!
! The program does nothing but SYNC ALL; then every image reads its resident
! memory (VmRSS) from /proc/self/status, and image 1 gathers the mean and
! the largest with co_sum and co_max.  The other half of an image's cost,
! the time from launch to exit, is the job's wall time: run-caf-bench.sh
! measures it around the launcher (cafrun, cafrun.openmpi), so it counts
! what a user waits for.  (bench/imagecost.f90, which bench/rankcost.sh
! runs, also counts threads and descriptors per image.)
!
! Output (image 1): "# key=value" lines, the header
!   op,images,rss_mib_mean,rss_mib_max
! and one row, e.g. caf_imagecost,4,11.402,11.512.  Exit status 0 unless
! /proc/self/status had no VmRSS line on some image.
program caf_imagecost
  use, intrinsic :: iso_fortran_env, only: int64, real64
  implicit none
  real(real64) :: rss, mean, top
  integer :: me, np, nfail
  logical :: quick

  quick = .false.
  call parse_args()
  me = this_image()
  np = num_images()
  nfail = 0
  sync all
  rss = real(vmrss_kb(), real64) / 1024.0_real64
  if (rss < 0) then
    write (*, '(a,i0,a)') '# FAIL image ', me, ': no VmRSS line in /proc/self/status'
    nfail = 1
  end if
  mean = rss
  top = rss
  call co_sum(mean, result_image=1)
  call co_max(top, result_image=1)
  if (me == 1) then
    write (*, '(a,i0)') '# bench=caf_imagecost images=', np
    write (*, '(a)') '# what=VmRSS after SYNC ALL, MiB: mean and largest over images'
    write (*, '(a)') 'op,images,rss_mib_mean,rss_mib_max'
    write (*, '(a,i0,a,a,a,a)') 'caf_imagecost,', np, ',', fmt(mean / np, 3), ',', &
      fmt(top, 3)
  end if
  call end_checks('caf_imagecost', nfail)

contains

  ! VmRSS of this process in kB, or -1.
  function vmrss_kb() result(kb)
    integer(int64) :: kb
    character(len=256) :: line
    integer :: u, ios
    kb = -1
    open (newunit=u, file='/proc/self/status', action='read', iostat=ios)
    if (ios /= 0) return
    do
      read (u, '(a)', iostat=ios) line
      if (ios /= 0) exit
      if (line(1:6) == 'VmRSS:') then
        read (line(7:), *, iostat=ios) kb
        if (ios /= 0) kb = -1
        exit
      end if
    end do
    close (u)
  end function vmrss_kb

  subroutine parse_args()
    integer :: ia, na
    character(len=256) :: arg
    na = command_argument_count()
    do ia = 1, na
      call get_command_argument(ia, arg)
      select case (trim(arg))
      case ('--quick')
        quick = .true.
      case ('-h', '--help')
        call usage('')
      case default
        call usage('unknown argument '//trim(arg))
      end select
    end do
  end subroutine parse_args

  subroutine usage(msg)
    character(len=*), intent(in) :: msg
    call usage_exit('caf_imagecost', msg, '[--quick]')
  end subroutine usage

  include 'bench_util.inc'
end program caf_imagecost
