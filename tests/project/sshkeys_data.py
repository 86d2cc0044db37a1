"""Real OpenSSH public keys (made with ssh-keygen) the key and cloud-init tests share."""

ED25519 = (
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBlkK65ze94m+7qawAIgSMIir06U9T6EhL4g6TS0EP2z alice@e"
    "xample.org"
)
ED25519_FINGERPRINT = "SHA256:6IQHc4vxSnOh7SWmeG8JSgj/UrFvunDujKhDqp5/1e8"
ECDSA = (
    "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBELtpE/7aoSGGWn5"
    "K0nDaYv5VkmgkG2tOMwt0Wr943wPrn6Ey8R5TUrDN3/B0sNmxPFCwMPIAlowX77O09M8qRY= bob"
)
RSA = (
    "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQCKhYlDETLRp9LI1pNmhEBs+euNQajcV3krwDZA6fjAgjI/ob3zQh"
    "OLyXhs6D8r4ocZYrU2Gii608Mtafnr+MHyIMAksomecsKllZYB+i1MzQdS2s1K2gJb2Ke/p6U8qYIPuxwaRslwD4"
    "4Gq4cOdpXiibU/wcAkyxj3YD0KCTxBI4tGWjSIChvI5vK7pQMxeeq09axu2GjOEdvq/zXh2I3hoOfZlgfCVL5+TT"
    "cAcs63dilMV2nQrTe9v4r1lR4q3rjqARHzQ9EwRlsiAdJEUEOnSyA4LJICTgscdhhYNFhaPsL5qz+KdcbxeexZCX"
    "halgNAwD7XJJB1r398T6BKj2ez carol"
)
RSA_FINGERPRINT = "SHA256:qrirBRMF9Tp9694hH2nJI1kge5O4nzuOrQxnvydzVic"
# Too short: 1024 bits.
RSA_1024 = (
    "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAAgQC6hrOS7gIqpxQuzviR08S3zpwK/Xdjegiwb+BxSGW6pFS5thk3"
    "/ZAiQClwBIuPOCvLNog1Gr2Q64IbicRT6YsLDNdJAzAllAveHC1LkkpEfhpROf+NDmPhCh55yWCWozaHXiocsRPh"
    "SB/MSZW3/xVmUl1392T4CpWVkQrAZmLSmw== root@vm"
)
