// Reads a JSON array of strings on stdin and prints a JSON array of their o200k_base token counts.
import { encode } from 'gpt-tokenizer/encoding/o200k_base';

let input = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => { input += chunk; });
process.stdin.on('end', () => {
  const texts = JSON.parse(input);
  process.stdout.write(JSON.stringify(texts.map((text) => encode(text).length)));
});
