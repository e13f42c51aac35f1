! hello.f90 -- a coarray "hello": every image writes its greeting into
! image 1's coarray, image 1 prints them in order.
!   caf hello.f90 -o hello && cafrun -n 4 ./hello
program hello
  implicit none
  character(len=48) :: greeting[*]
  character(len=48), allocatable :: all(:)[:]
  integer :: i, me, n

  me = this_image()
  n = num_images()
  allocate(all(n)[*])
  write(greeting, '(a,i0,a,i0)') 'Hello from image ', me, ' of ', n
  all(me)[1] = greeting          ! a put into image 1's memory
  sync all
  if (me == 1) then
     do i = 1, n
        print '(a)', trim(all(i))
     end do
     print '(a,a)', 'image 1 read from the last image: ', trim(greeting[n])
  end if
end program hello
