#!/bin/bash
# vsftpd on 127.0.0.1:$PORT, local user $USER_NAME/$USER_PASS (default ftptest/ftppass), explicit FTPS optional
# (self-signed certificate $DIR/cert.pem for IP 127.0.0.1), passive ports $PASV_MIN-$PASV_MAX. Run as root.
set -euo pipefail
PORT=${PORT:-2121}; DIR=${DIR:-$(mktemp -d /tmp/vsftpd-test.XXXXXX)}
USER_NAME=${USER_NAME:-ftptest}; USER_PASS=${USER_PASS:-ftppass}
PASV_MIN=${PASV_MIN:-30000}; PASV_MAX=${PASV_MAX:-30100}
mkdir -p "$DIR/home" /var/run/vsftpd/empty
chmod 755 "$DIR"
id -u "$USER_NAME" >/dev/null 2>&1 || useradd -M -d "$DIR/home" -s /bin/sh "$USER_NAME"   # shell must be in /etc/shells (pam_shells)
usermod -d "$DIR/home" "$USER_NAME" >/dev/null 2>&1 || true
echo "$USER_NAME:$USER_PASS" | chpasswd; chown "$USER_NAME:" "$DIR/home"
[ -f "$DIR/cert.pem" ] || openssl req -x509 -newkey rsa:2048 -nodes -keyout "$DIR/key.pem" -out "$DIR/cert.pem" -days 365 -subj /CN=127.0.0.1 -addext "subjectAltName=IP:127.0.0.1" 2>/dev/null
cat > "$DIR/vsftpd.conf" <<CFG
listen=YES
listen_ipv6=NO
listen_address=127.0.0.1
listen_port=$PORT
background=NO
anonymous_enable=NO
local_enable=YES
write_enable=YES
local_umask=022
chroot_local_user=YES
allow_writeable_chroot=YES
pasv_enable=YES
pasv_address=127.0.0.1
pasv_min_port=$PASV_MIN
pasv_max_port=$PASV_MAX
secure_chroot_dir=/var/run/vsftpd/empty
pam_service_name=vsftpd
seccomp_sandbox=NO
xferlog_enable=YES
vsftpd_log_file=$DIR/vsftpd.log
ssl_enable=YES
rsa_cert_file=$DIR/cert.pem
rsa_private_key_file=$DIR/key.pem
force_local_logins_ssl=NO
force_local_data_ssl=NO
require_ssl_reuse=NO
ssl_ciphers=HIGH
CFG
/usr/sbin/vsftpd "$DIR/vsftpd.conf" < /dev/null > "$DIR/stdout.log" 2>&1 &
echo $! > "$DIR/vsftpd.pid"
for i in $(seq 1 100); do
  if curl -s --max-time 1 "ftp://127.0.0.1:$PORT/" -u "$USER_NAME:$USER_PASS" >/dev/null; then echo "vsftpd ready 127.0.0.1:$PORT dir=$DIR pid=$(cat $DIR/vsftpd.pid)"; exit 0; fi
  sleep 0.1
done
echo "vsftpd failed"; cat "$DIR/stdout.log"; exit 1
