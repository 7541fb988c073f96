<?php echo '<!DOCTYPE html><html><body><h1>Hello World!</h1></body></html>';
