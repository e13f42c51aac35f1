! imagecost.f90 -- what an empty coarray image costs: after SYNC ALL each
! image prints one line with its resident memory (VmRSS, kB), its threads
! and its open file descriptors, read from /proc.  bench/rankcost.sh runs
! it under caf/cafrun and under OpenCoarrays (caf.openmpi/cafrun.openmpi).
program imagecost
  implicit none
  character(len=256) :: line
  character(len=200) :: cmd
  integer :: u, ios, rss, thr
  rss = -1; thr = -1
  sync all
  open(newunit=u, file='/proc/self/status', action='read', iostat=ios)
  do while (ios == 0)
     read(u, '(a)', iostat=ios) line
     if (ios /= 0) exit
     if (line(1:6) == 'VmRSS:') read(line(7:), *) rss
     if (line(1:8) == 'Threads:') read(line(9:), *) thr
  end do
  close(u)
  write(cmd, '(a,i0,a,i0,a,i0,a,i0,a)') 'echo image ', this_image(), ' rss_kb ', rss, &
       ' threads ', thr, ' fds $(ls /proc/', getpid(), '/fd | wc -l)'
  call execute_command_line(trim(cmd))
  sync all
end program imagecost
