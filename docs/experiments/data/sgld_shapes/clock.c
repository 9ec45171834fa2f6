/* Clock estimate: a chain of dependent 64-bit imul (3 cycles each on Intel cores since Sandy
   Bridge), and a chain of dependent add-immediates (1 cycle each unless the core folds them). */
#include <stdio.h>
#include <time.h>
static double now(void){ struct timespec t; clock_gettime(CLOCK_MONOTONIC,&t); return t.tv_sec+t.tv_nsec*1e-9; }
int main(void){
  long n=1000000000, x=1, y=0; double a,b;
  a=now(); for(long i=0;i<n;i++) __asm__ volatile("imul %0,%0\n\timul %0,%0\n\timul %0,%0\n\timul %0,%0":"+r"(x)); b=now();
  printf("imul chain: %.2f G imul/s -> %.2f GHz at 3 cycles each\n", 4.0*n/(b-a)/1e9, 3*4.0*n/(b-a)/1e9);
  a=now(); for(long i=0;i<n;i++) __asm__ volatile("add $1,%0\n\tadd $1,%0\n\tadd $1,%0\n\tadd $1,%0\n\tadd $1,%0\n\tadd $1,%0\n\tadd $1,%0\n\tadd $1,%0":"+r"(y)); b=now();
  printf("add-immediate chain: %.2f G adds/s\n", 8.0*n/(b-a)/1e9);
  return (int)(x+y)&1;
}
