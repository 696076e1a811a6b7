#!/bin/bash
# Apache2 mod_dav on 127.0.0.1:$PORT, Basic auth $USER_NAME/$USER_PASS (default davtest/davpass); HTTPS when
# SSL_CERT and SSL_KEY name a certificate and its key, served dir $DIR/root. Run as root (workers run as www-data).
set -euo pipefail
PORT=${PORT:-8093}; DIR=${DIR:-$(mktemp -d /tmp/apache-dav.XXXXXX)}
mkdir -p "$DIR/root" "$DIR/lock"; chmod 755 "$DIR"; chown www-data:www-data "$DIR/root" "$DIR/lock"
USER_NAME=${USER_NAME:-davtest}; USER_PASS=${USER_PASS:-davpass}
htpasswd -bc "$DIR/htpasswd" "$USER_NAME" "$USER_PASS" 2>/dev/null
M=/usr/lib/apache2/modules
SSL_CONF=""; SCHEME=http
if [ -n "${SSL_CERT:-}" ]; then
  SCHEME=https
  SSL_CONF="LoadModule ssl_module $M/mod_ssl.so
LoadModule socache_shmcb_module $M/mod_socache_shmcb.so
SSLEngine on
SSLCertificateFile $SSL_CERT
SSLCertificateKeyFile $SSL_KEY"
fi
cat > "$DIR/httpd.conf" <<CFG
ServerRoot "$DIR"
ServerName 127.0.0.1
Listen 127.0.0.1:$PORT
PidFile $DIR/httpd.pid
ErrorLog $DIR/error.log
LogLevel warn
User www-data
Group www-data
LoadModule mpm_event_module $M/mod_mpm_event.so
LoadModule authn_core_module $M/mod_authn_core.so
LoadModule authn_file_module $M/mod_authn_file.so
LoadModule authz_core_module $M/mod_authz_core.so
LoadModule authz_user_module $M/mod_authz_user.so
LoadModule auth_basic_module $M/mod_auth_basic.so
LoadModule dav_module $M/mod_dav.so
LoadModule dav_fs_module $M/mod_dav_fs.so
LoadModule mime_module $M/mod_mime.so
LoadModule autoindex_module $M/mod_autoindex.so
TypesConfig /etc/mime.types
$SSL_CONF
DavLockDB $DIR/lock/davlock
DocumentRoot $DIR/root
<Directory $DIR/root>
  Dav On
  DavDepthInfinity On
  Options Indexes
  AllowOverride None
  AuthType Basic
  AuthName "dav"
  AuthUserFile $DIR/htpasswd
  Require valid-user
</Directory>
CFG
/usr/sbin/apache2 -t -f "$DIR/httpd.conf"
/usr/sbin/apache2 -f "$DIR/httpd.conf" -DFOREGROUND < /dev/null > "$DIR/stdout.log" 2>&1 &
echo $! > "$DIR/apache.bgpid"
for i in $(seq 1 100); do
  if [ "$(curl -s -k -o /dev/null -w '%{http_code}' -u "$USER_NAME:$USER_PASS" -X PROPFIND -H 'Depth: 0' $SCHEME://127.0.0.1:$PORT/)" = 207 ]; then echo "apache dav ready 127.0.0.1:$PORT dir=$DIR pid=$(cat $DIR/apache.bgpid)"; exit 0; fi
  sleep 0.1
done
echo "apache failed"; cat "$DIR/stdout.log" "$DIR/error.log"; exit 1
