# Sourced by the round scripts: the median and the range of a list of numbers
# given as one space-separated string.
median() { printf '%s\n' $1 | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
range() { printf '%s\n' $1 | sort -g | awk 'NR==1{lo=$1} {hi=$1} END {print lo "-" hi}'; }
