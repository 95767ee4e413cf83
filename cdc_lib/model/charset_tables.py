"""The server's charset tables, which `cdc_lib.model.charsets` decodes with. GENERATED: do not edit by hand.

What a MariaDB server shows for every code of every charset: `python -m tools.charset_tables --socket
/path/to/mysqld.sock --write` rewrites this module; tests/integration/test_charsets.py checks it code by code
against the test suite's server.
"""

# Derived from MariaDB 10.11.19-MariaDB-0+deb12u1-log. Do not edit by hand: rerun the script.
SINGLE_BYTE: dict[str, str] = {
    'armscii8': (
        '\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f'
        '\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f'
        ' !"#$%&\'()*+,-./'
        '0123456789:;<=>?'
        '@ABCDEFGHIJKLMNO'
        'PQRSTUVWXYZ[\\]^_'
        '`abcdefghijklmno'
        'pqrstuvwxyz{|}~\x7f'
        '\x80\x81\x82\x83\x84\x85\x86\x87\x88\x89\x8a\x8b\x8c\x8d\x8e\x8f'
        '\x90\x91\x92\x93\x94\x95\x96\x97\x98\x99\x9a\x9b\x9c\x9d\x9e\x9f'
        '\xa0❁§։)(»«—.՝,-՟…՜'
        '՛՞ԱաԲբԳգԴդԵեԶզԷէ'
        'ԸըԹթԺժԻիԼլԽխԾծԿկ'
        'ՀհՁձՂղՃճՄմՅյՆնՇշ'
        'ՈոՉչՊպՋջՌռՍսՎվՏտ'
        "ՐրՑցՒւՓփՔքՕօՖֆ’'"
    ),
    'ascii': (
        '\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f'
        '\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f'
        ' !"#$%&\'()*+,-./'
        '0123456789:;<=>?'
        '@ABCDEFGHIJKLMNO'
        'PQRSTUVWXYZ[\\]^_'
        '`abcdefghijklmno'
        'pqrstuvwxyz{|}~\x7f'
        '????????????????'
        '????????????????'
        '????????????????'
        '????????????????'
        '????????????????'
        '????????????????'
        '????????????????'
        '????????????????'
    ),
    'cp1250': (
        '\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f'
        '\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f'
        ' !"#$%&\'()*+,-./'
        '0123456789:;<=>?'
        '@ABCDEFGHIJKLMNO'
        'PQRSTUVWXYZ[\\]^_'
        '`abcdefghijklmno'
        'pqrstuvwxyz{|}~\x7f'
        '€?‚?„…†‡?‰Š‹ŚŤŽŹ'
        '?‘’“”•–—?™š›śťžź'
        '\xa0ˇ˘Ł¤Ą¦§¨©Ş«¬\xad®Ż'
        '°±˛ł´µ¶·¸ąş»Ľ˝ľż'
        'ŔÁÂĂÄĹĆÇČÉĘËĚÍÎĎ'
        'ĐŃŇÓÔŐÖ×ŘŮÚŰÜÝŢß'
        'ŕáâăäĺćçčéęëěíîď'
        'đńňóôőö÷řůúűüýţ˙'
    ),
    'cp1251': (
        '\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f'
        '\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f'
        ' !"#$%&\'()*+,-./'
        '0123456789:;<=>?'
        '@ABCDEFGHIJKLMNO'
        'PQRSTUVWXYZ[\\]^_'
        '`abcdefghijklmno'
        'pqrstuvwxyz{|}~\x7f'
        'ЂЃ‚ѓ„…†‡€‰Љ‹ЊЌЋЏ'
        'ђ‘’“”•–—?™љ›њќћџ'
        '\xa0ЎўЈ¤Ґ¦§Ё©Є«¬\xad®Ї'
        '°±Ііґµ¶·ё№є»јЅѕї'
        'АБВГДЕЖЗИЙКЛМНОП'
        'РСТУФХЦЧШЩЪЫЬЭЮЯ'
        'абвгдежзийклмноп'
        'рстуфхцчшщъыьэюя'
    ),
    'cp1256': (
        '\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f'
        '\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f'
        ' !"#$%&\'()*+,-./'
        '0123456789:;<=>?'
        '@ABCDEFGHIJKLMNO'
        'PQRSTUVWXYZ[\\]^_'
        '`abcdefghijklmno'
        'pqrstuvwxyz{|}~\x7f'
        '€پ‚ƒ„…†‡ˆ‰?‹Œچژ?'
        'گ‘’“”•–—?™?›œ\u200c\u200d?'
        '\xa0،¢£¤¥¦§¨©?«¬\xad®¯'
        '°±²³´µ¶·¸¹؛»¼½¾؟'
        '?ءآأؤإئابةتثجحخد'
        'ذرزسشصض×طظعغـفقك'
        'àلâمنهوçèéêëىيîï'
        'ًٌٍَôُِ÷ّùْûü\u200e\u200f?'
    ),
    'cp1257': (
        '\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f'
        '\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f'
        ' !"#$%&\'()*+,-./'
        '0123456789:;<=>?'
        '@ABCDEFGHIJKLMNO'
        'PQRSTUVWXYZ[\\]^_'
        '`abcdefghijklmno'
        'pqrstuvwxyz{|}~\x7f'
        '€?‚?„…†‡?‰?‹?¨ˇ¸'
        '?‘’“”•–—?™?›?¯˛?'
        '\xa0?¢£¤?¦§Ø©Ŗ«¬\xad®Æ'
        '°±²³´µ¶·ø¹ŗ»¼½¾æ'
        'ĄĮĀĆÄÅĘĒČÉŹĖĢĶĪĻ'
        'ŠŃŅÓŌÕÖ×ŲŁŚŪÜŻŽß'
        'ąįāćäåęēčéźėģķīļ'
        'šńņóōõö÷ųłśūüżž˙'
    ),
    'cp850': (
        '\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f'
        '\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f'
        ' !"#$%&\'()*+,-./'
        '0123456789:;<=>?'
        '@ABCDEFGHIJKLMNO'
        'PQRSTUVWXYZ[\\]^_'
        '`abcdefghijklmno'
        'pqrstuvwxyz{|}~\x7f'
        'ÇüéâäàåçêëèïîìÄÅ'
        'ÉæÆôöòûùÿÖÜø£Ø×ƒ'
        'áíóúñÑªº¿®¬½¼¡«»'
        '░▒▓│┤ÁÂÀ©╣║╗╝¢¥┐'
        '└┴┬├─┼ãÃ╚╔╩╦╠═╬¤'
        'ðÐÊËÈıÍÎÏ┘┌█▄¦Ì▀'
        'ÓßÔÒõÕµþÞÚÛÙýÝ¯´'
        '\xad±‗¾¶§÷¸°¨·¹³²■\xa0'
    ),
    'cp852': (
        '\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f'
        '\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f'
        ' !"#$%&\'()*+,-./'
        '0123456789:;<=>?'
        '@ABCDEFGHIJKLMNO'
        'PQRSTUVWXYZ[\\]^_'
        '`abcdefghijklmno'
        'pqrstuvwxyz{|}~\x7f'
        'ÇüéâäůćçłëŐőîŹÄĆ'
        'ÉĹĺôöĽľŚśÖÜŤťŁ×č'
        'áíóúĄąŽžĘę¬źČş«»'
        '░▒▓│┤ÁÂĚŞ╣║╗╝Żż┐'
        '└┴┬├─┼Ăă╚╔╩╦╠═╬¤'
        'đĐĎËďŇÍÎě┘┌█▄ŢŮ▀'
        'ÓßÔŃńňŠšŔÚŕŰýÝţ´'
        '\xad˝˛ˇ˘§÷¸°¨˙űŘř■\xa0'
    ),
    'cp866': (
        '\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f'
        '\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f'
        ' !"#$%&\'()*+,-./'
        '0123456789:;<=>?'
        '@ABCDEFGHIJKLMNO'
        'PQRSTUVWXYZ[\\]^_'
        '`abcdefghijklmno'
        'pqrstuvwxyz{|}~\x7f'
        'АБВГДЕЖЗИЙКЛМНОП'
        'РСТУФХЦЧШЩЪЫЬЭЮЯ'
        'абвгдежзийклмноп'
        '░▒▓│┤╡╢╖╕╣║╗╝╜╛┐'
        '└┴┬├─┼╞╟╚╔╩╦╠═╬╧'
        '╨╤╥╙╘╒╓╫╪┘┌█▄▌▐▀'
        'рстуфхцчшщъыьэюя'
        'ЁёЄєЇїЎў°∙·√ⁿ²■\xa0'
    ),
    'dec8': (
        '\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f'
        '\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f'
        ' !"#$%&\'()*+,-./'
        '0123456789:;<=>?'
        '@ABCDEFGHIJKLMNO'
        'PQRSTUVWXYZ[\\]^_'
        '`abcdefghijklmno'
        'pqrstuvwxyz{|}~\x7f'
        '\x80\x81\x82\x83\x84\x85\x86\x87\x88\x89\x8a\x8b\x8c\x8d\x8e\x8f'
        '\x90\x91\x92\x93\x94\x95\x96\x97\x98\x99\x9a\x9b\x9c\x9d\x9e\x9f'
        '\xa0¡¢£?¥?§¤©ª«????'
        '°±²³?µ¶·?¹º»¼½?¿'
        'ÀÁÂÃÄÅÆÇÈÉÊËÌÍÎÏ'
        '?ÑÒÓÔÕÖŒØÙÚÛÜŸ?ß'
        'àáâãäåæçèéêëìíîï'
        '?ñòóôõöœøùúûüÿ??'
    ),
    'geostd8': (
        '\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f'
        '\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f'
        ' !"#$%&\'()*+,-./'
        '0123456789:;<=>?'
        '@ABCDEFGHIJKLMNO'
        'PQRSTUVWXYZ[\\]^_'
        '`abcdefghijklmno'
        'pqrstuvwxyz{|}~\x7f'
        '€?‚?„…†‡?‰?‹????'
        '?‘’“”•–—???›????'
        '\xa0¡¢£¤¥¦§¨©ª«¬\xad®¯'
        '°±²³´µ¶·¸¹º»¼½¾¿'
        'აბგდევზჱთიკლმნჲო'
        'პჟრსტჳუფქღყშჩცძწ'
        'ჭხჴჯჰჵ??????????'
        '?????????????№??'
    ),
    'greek': (
        '\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f'
        '\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f'
        ' !"#$%&\'()*+,-./'
        '0123456789:;<=>?'
        '@ABCDEFGHIJKLMNO'
        'PQRSTUVWXYZ[\\]^_'
        '`abcdefghijklmno'
        'pqrstuvwxyz{|}~\x7f'
        '\x80\x81\x82\x83\x84\x85\x86\x87\x88\x89\x8a\x8b\x8c\x8d\x8e\x8f'
        '\x90\x91\x92\x93\x94\x95\x96\x97\x98\x99\x9a\x9b\x9c\x9d\x9e\x9f'
        '\xa0ʽʼ£??¦§¨©?«¬\xad?―'
        '°±²³΄΅Ά·ΈΉΊ»Ό½ΎΏ'
        'ΐΑΒΓΔΕΖΗΘΙΚΛΜΝΞΟ'
        'ΠΡ?ΣΤΥΦΧΨΩΪΫάέήί'
        'ΰαβγδεζηθικλμνξο'
        'πρςστυφχψωϊϋόύώ?'
    ),
    'hebrew': (
        '\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f'
        '\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f'
        ' !"#$%&\'()*+,-./'
        '0123456789:;<=>?'
        '@ABCDEFGHIJKLMNO'
        'PQRSTUVWXYZ[\\]^_'
        '`abcdefghijklmno'
        'pqrstuvwxyz{|}~\x7f'
        '\x80\x81\x82\x83\x84\x85\x86\x87\x88\x89\x8a\x8b\x8c\x8d\x8e\x8f'
        '\x90\x91\x92\x93\x94\x95\x96\x97\x98\x99\x9a\x9b\x9c\x9d\x9e\x9f'
        '\xa0?¢£¤¥¦§¨©×«¬\xad®‾'
        '°±²³´µ¶·¸¹÷»¼½¾?'
        '????????????????'
        '???????????????‗'
        'אבגדהוזחטיךכלםמן'
        'נסעףפץצקרשת??\u200e\u200f?'
    ),
    'hp8': (
        '\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f'
        '\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f'
        ' !"#$%&\'()*+,-./'
        '0123456789:;<=>?'
        '@ABCDEFGHIJKLMNO'
        'PQRSTUVWXYZ[\\]^_'
        '`abcdefghijklmno'
        'pqrstuvwxyz{|}~\x7f'
        '\x80\x81\x82\x83\x84\x85\x86\x87\x88\x89\x8a\x8b\x8c\x8d\x8e\x8f'
        '\x90\x91\x92\x93\x94\x95\x96\x97\x98\x99\x9a\x9b\x9c\x9d\x9e\x9f'
        '\xa0ÀÂÈÊËÎÏ´ˋˆ¨˜ÙÛ₤'
        '¯Ýý°ÇçÑñ¡¿¤£¥§ƒ¢'
        'âêôûáéóúàèòùäëöü'
        'ÅîØÆåíøæÄìÖÜÉïßÔ'
        'ÁÃãÐðÍÌÓÒÕõŠšÚŸÿ'
        'Þþ·µ¶¾—¼½ªº«■»±?'
    ),
    'keybcs2': (
        '\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f'
        '\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f'
        ' !"#$%&\'()*+,-./'
        '0123456789:;<=>?'
        '@ABCDEFGHIJKLMNO'
        'PQRSTUVWXYZ[\\]^_'
        '`abcdefghijklmno'
        'pqrstuvwxyz{|}~\x7f'
        'ČüéďäĎŤčěĚĹÍľĺÄÁ'
        'ÉžŽôöÓůÚýÖÜŠĽÝŘť'
        'áíóúňŇŮÔšřŕŔ¼¡«»'
        '░▒▓│┤╡╢╖╕╣║╗╝╜╛┐'
        '└┴┬├─┼╞╟╚╔╩╦╠═╬╧'
        '╨╤╥╙╘╒╓╫╪┘┌█▄▌▐▀'
        'αßΓπΣσµτΦΘΩδ∞φε∩'
        '≡±≥≤⌠⌡÷≈°∙·√ⁿ²■\xa0'
    ),
    'koi8r': (
        '\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f'
        '\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f'
        ' !"#$%&\'()*+,-./'
        '0123456789:;<=>?'
        '@ABCDEFGHIJKLMNO'
        'PQRSTUVWXYZ[\\]^_'
        '`abcdefghijklmno'
        'pqrstuvwxyz{|}~\x7f'
        '─│┌┐└┘├┤┬┴┼▀▄█▌▐'
        '░▒▓⌠■∙√≈≤≥\xa0⌡°²·÷'
        '═║╒ё╓╔╕╖╗╘╙╚╛╜╝╞'
        '╟╠╡Ё╢╣╤╥╦╧╨╩╪╫╬©'
        'юабцдефгхийклмно'
        'пярстужвьызшэщчъ'
        'ЮАБЦДЕФГХИЙКЛМНО'
        'ПЯРСТУЖВЬЫЗШЭЩЧЪ'
    ),
    'koi8u': (
        '\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f'
        '\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f'
        ' !"#$%&\'()*+,-./'
        '0123456789:;<=>?'
        '@ABCDEFGHIJKLMNO'
        'PQRSTUVWXYZ[\\]^_'
        '`abcdefghijklmno'
        'pqrstuvwxyz{|}~\x7f'
        '─│┌┐└┘├┤┬┴┼▀▄█▌▐'
        '░▒▓⌠■•√≈≤≥\xa0⌡°²·÷'
        '═║╒ёє╔ії╗╘╙╚╛ґ╝╞'
        '╟╠╡ЁЄ╣ІЇ╦╧╨╩╪Ґ╬©'
        'юабцдефгхийклмно'
        'пярстужвьызшэщчъ'
        'ЮАБЦДЕФГХИЙКЛМНО'
        'ПЯРСТУЖВЬЫЗШЭЩЧЪ'
    ),
    'latin1': (
        '\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f'
        '\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f'
        ' !"#$%&\'()*+,-./'
        '0123456789:;<=>?'
        '@ABCDEFGHIJKLMNO'
        'PQRSTUVWXYZ[\\]^_'
        '`abcdefghijklmno'
        'pqrstuvwxyz{|}~\x7f'
        '€\x81‚ƒ„…†‡ˆ‰Š‹Œ\x8dŽ\x8f'
        '\x90‘’“”•–—˜™š›œ\x9džŸ'
        '\xa0¡¢£¤¥¦§¨©ª«¬\xad®¯'
        '°±²³´µ¶·¸¹º»¼½¾¿'
        'ÀÁÂÃÄÅÆÇÈÉÊËÌÍÎÏ'
        'ÐÑÒÓÔÕÖ×ØÙÚÛÜÝÞß'
        'àáâãäåæçèéêëìíîï'
        'ðñòóôõö÷øùúûüýþÿ'
    ),
    'latin2': (
        '\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f'
        '\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f'
        ' !"#$%&\'()*+,-./'
        '0123456789:;<=>?'
        '@ABCDEFGHIJKLMNO'
        'PQRSTUVWXYZ[\\]^_'
        '`abcdefghijklmno'
        'pqrstuvwxyz{|}~\x7f'
        '\x80\x81\x82\x83\x84\x85\x86\x87\x88\x89\x8a\x8b\x8c\x8d\x8e\x8f'
        '\x90\x91\x92\x93\x94\x95\x96\x97\x98\x99\x9a\x9b\x9c\x9d\x9e\x9f'
        '\xa0Ą˘Ł¤ĽŚ§¨ŠŞŤŹ\xadŽŻ'
        '°ą˛ł´ľśˇ¸šşťź˝žż'
        'ŔÁÂĂÄĹĆÇČÉĘËĚÍÎĎ'
        'ĐŃŇÓÔŐÖ×ŘŮÚŰÜÝŢß'
        'ŕáâăäĺćçčéęëěíîď'
        'đńňóôőö÷řůúűüýţ˙'
    ),
    'latin5': (
        '\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f'
        '\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f'
        ' !"#$%&\'()*+,-./'
        '0123456789:;<=>?'
        '@ABCDEFGHIJKLMNO'
        'PQRSTUVWXYZ[\\]^_'
        '`abcdefghijklmno'
        'pqrstuvwxyz{|}~\x7f'
        '\x80\x81\x82\x83\x84\x85\x86\x87\x88\x89\x8a\x8b\x8c\x8d\x8e\x8f'
        '\x90\x91\x92\x93\x94\x95\x96\x97\x98\x99\x9a\x9b\x9c\x9d\x9e\x9f'
        '\xa0¡¢£¤¥¦§¨©ª«¬\xad®¯'
        '°±²³´µ¶·¸¹º»¼½¾¿'
        'ÀÁÂÃÄÅÆÇÈÉÊËÌÍÎÏ'
        'ĞÑÒÓÔÕÖ×ØÙÚÛÜİŞß'
        'àáâãäåæçèéêëìíîï'
        'ğñòóôõö÷øùúûüışÿ'
    ),
    'latin7': (
        '\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f'
        '\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f'
        ' !"#$%&\'()*+,-./'
        '0123456789:;<=>?'
        '@ABCDEFGHIJKLMNO'
        'PQRSTUVWXYZ[\\]^_'
        '`abcdefghijklmno'
        'pqrstuvwxyz{|}~\x7f'
        '\x80\x81\x82\x83\x84\x85\x86\x87\x88\x89\x8a\x8b\x8c\x8d\x8e\x8f'
        '\x90\x91\x92\x93\x94\x95\x96\x97\x98\x99\x9a\x9b\x9c\x9d\x9e\x9f'
        '\xa0”¢£¤„¦§Ø©Ŗ«¬\xad®Æ'
        '°±²³“µ¶·ø¹ŗ»¼½¾æ'
        'ĄĮĀĆÄÅĘĒČÉŹĖĢĶĪĻ'
        'ŠŃŅÓŌÕÖ×ŲŁŚŪÜŻŽß'
        'ąįāćäåęēčéźėģķīļ'
        'šńņóōõö÷ųłśūüżž’'
    ),
    'macce': (
        '\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f'
        '\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f'
        ' !"#$%&\'()*+,-./'
        '0123456789:;<=>?'
        '@ABCDEFGHIJKLMNO'
        'PQRSTUVWXYZ[\\]^_'
        '`abcdefghijklmno'
        'pqrstuvwxyz{|}~\x7f'
        'ÄĀāÉĄÖÜáąČäčĆćéŹ'
        'źĎíďĒēĖóėôöõúĚěü'
        '†°Ę£§•¶ß®©™ę¨≠ģĮ'
        'įĪ≤≥īĶ∂∑łĻļĽľĹĺŅ'
        'ņŃ¬√ńŇ∆«»…\xa0ňŐÕőŌ'
        '–—“”‘’÷◊ōŔŕŘ‹›řŖ'
        'ŗŠ‚„šŚśÁŤťÍŽžŪÓÔ'
        'ūŮÚůŰűŲųÝýķŻŁżĢˇ'
    ),
    'macroman': (
        '\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f'
        '\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f'
        ' !"#$%&\'()*+,-./'
        '0123456789:;<=>?'
        '@ABCDEFGHIJKLMNO'
        'PQRSTUVWXYZ[\\]^_'
        '`abcdefghijklmno'
        'pqrstuvwxyz{|}~\x7f'
        'ÄÅÇÉÑÖÜáàâäãåçéè'
        'êëíìîïñóòôöõúùûü'
        '†°¢£§•¶ß®©™´¨≠ÆØ'
        '∞±≤≥¥µ∂∑∏π∫ªºΩæø'
        '¿¡¬√ƒ≈∆«»…\xa0ÀÃÕŒœ'
        '–—“”‘’÷◊ÿŸ⁄€‹›ﬁﬂ'
        '‡·‚„‰ÂÊÁËÈÍÎÏÌÓÔ'
        '\uf8ffÒÚÛÙıˆ˜¯˘˙˚¸˝˛ˇ'
    ),
    'swe7': (
        '\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f'
        '\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f'
        ' !"#$%&\'()*+,-./'
        '0123456789:;<=>?'
        'ÉABCDEFGHIJKLMNO'
        'PQRSTUVWXYZÄÖÅÜ_'
        'éabcdefghijklmno'
        'pqrstuvwxyzäöåü?'
        '????????????????'
        '????????????????'
        '????????????????'
        '????????????????'
        '????????????????'
        '????????????????'
        '????????????????'
        '????????????????'
    ),
    'tis620': (
        '\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f'
        '\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f'
        ' !"#$%&\'()*+,-./'
        '0123456789:;<=>?'
        '@ABCDEFGHIJKLMNO'
        'PQRSTUVWXYZ[\\]^_'
        '`abcdefghijklmno'
        'pqrstuvwxyz{|}~\x7f'
        '\x80\x81\x82\x83\x84\x85\x86\x87\x88\x89\x8a\x8b\x8c\x8d\x8e\x8f'
        '\x90\x91\x92\x93\x94\x95\x96\x97\x98\x99\x9a\x9b\x9c\x9d\x9e\x9f'
        '�กขฃคฅฆงจฉชซฌญฎฏ'
        'ฐฑฒณดตถทธนบปผฝพฟ'
        'ภมยรฤลฦวศษสหฬอฮฯ'
        'ะัาำิีึืฺุู����฿'
        'เแโใไๅๆ็่้๊๋์ํ๎๏'
        '๐๑๒๓๔๕๖๗๘๙๚๛����'
    ),
}
# charset: (Python codec, (two-byte lead bytes, three-byte lead bytes),
#           the codes the codec gets wrong as runs (first, last, the server's text for the first,
#           step): step 0: every code shows that text; step 1: each next code the next code point)
MULTI_BYTE: dict[str, tuple[str, tuple[bytes, bytes], tuple[tuple[int, int, str, int], ...]]] = {
    'big5': (
        'big5',
        (bytes([*range(0xA1, 0xFA)]), bytes([])),
        (
            (0xA15A, 0xA15A, '�', 0), (0xA1C3, 0xA1C3, '�', 0), (0xA1C5, 0xA1C5, '�', 0),
            (0xA1FE, 0xA1FE, '�', 0), (0xA240, 0xA240, '�', 0), (0xA2CC, 0xA2CC, '�', 0),
            (0xA2CE, 0xA2CE, '�', 0), (0xA3C0, 0xA3FE, '?', 0), (0xC7FD, 0xC7FE, '?', 0),
            (0xC840, 0xC87E, '?', 0), (0xC8A1, 0xC8FE, '?', 0), (0xF9D6, 0xF9D6, '碁', 0),
            (0xF9D7, 0xF9D7, '銹', 0), (0xF9D8, 0xF9D8, '裏', 0), (0xF9D9, 0xF9D9, '墻', 0),
            (0xF9DA, 0xF9DA, '恒', 0), (0xF9DB, 0xF9DB, '粧', 0), (0xF9DC, 0xF9DC, '嫺', 0),
            (0xF9DD, 0xF9FE, '?', 0),
        ),
    ),
    'cp932': (
        'cp932',
        (bytes([*range(0x81, 0xA0), *range(0xE0, 0xFD)]), bytes([])),
        (
            (0x81AD, 0x81B7, '?', 0), (0x81C0, 0x81C7, '?', 0), (0x81CF, 0x81D9, '?', 0),
            (0x81E9, 0x81EF, '?', 0), (0x81F8, 0x81FB, '?', 0), (0x8240, 0x824E, '?', 0),
            (0x8259, 0x825F, '?', 0), (0x827A, 0x827E, '?', 0), (0x8280, 0x8280, '?', 0),
            (0x829B, 0x829E, '?', 0), (0x82F2, 0x82FC, '?', 0), (0x8397, 0x839E, '?', 0),
            (0x83B7, 0x83BE, '?', 0), (0x83D7, 0x83FC, '?', 0), (0x8461, 0x846F, '?', 0),
            (0x8492, 0x849E, '?', 0), (0x84BF, 0x84FC, '?', 0), (0x8540, 0x857E, '?', 0),
            (0x8580, 0x85FC, '?', 0), (0x8640, 0x867E, '?', 0), (0x8680, 0x86FC, '?', 0),
            (0x875E, 0x875E, '?', 0), (0x8776, 0x877D, '?', 0), (0x879D, 0x87FC, '?', 0),
            (0x8840, 0x887E, '?', 0), (0x8880, 0x889E, '?', 0), (0x9873, 0x987E, '?', 0),
            (0x9880, 0x989E, '?', 0), (0xEAA5, 0xEAFC, '?', 0), (0xEB40, 0xEB7E, '?', 0),
            (0xEB80, 0xEBFC, '?', 0), (0xEC40, 0xEC7E, '?', 0), (0xEC80, 0xECFC, '?', 0),
            (0xEEED, 0xEEEE, '?', 0), (0xEF40, 0xEF7E, '?', 0), (0xEF80, 0xEFFC, '?', 0),
            (0xFC4C, 0xFC7E, '?', 0), (0xFC80, 0xFCFC, '?', 0),
        ),
    ),
    'eucjpms': (
        'euc_jp',
        (bytes([*range(0x8E, 0x8F), *range(0xA1, 0xFF)]), bytes([*range(0x8F, 0x90)])),
        (
            (0xA1C1, 0xA1C1, '～', 0), (0xA1C2, 0xA1C2, '∥', 0), (0xA1DD, 0xA1DD, '－', 0),
            (0xA1F1, 0xA1F2, '￠', 1), (0xA2AF, 0xA2B9, '?', 0), (0xA2C2, 0xA2C9, '?', 0),
            (0xA2CC, 0xA2CC, '￢', 0), (0xA2D1, 0xA2DB, '?', 0), (0xA2EB, 0xA2F1, '?', 0),
            (0xA2FA, 0xA2FD, '?', 0), (0xA3A1, 0xA3AF, '?', 0), (0xA3BA, 0xA3C0, '?', 0),
            (0xA3DB, 0xA3E0, '?', 0), (0xA3FB, 0xA3FE, '?', 0), (0xA4F4, 0xA4FE, '?', 0),
            (0xA5F7, 0xA5FE, '?', 0), (0xA6B9, 0xA6C0, '?', 0), (0xA6D9, 0xA6FE, '?', 0),
            (0xA7C2, 0xA7D0, '?', 0), (0xA7F2, 0xA7FE, '?', 0), (0xA8C1, 0xA8FE, '?', 0),
            (0xA9A1, 0xA9FE, '?', 0), (0xAAA1, 0xAAFE, '?', 0), (0xABA1, 0xABFE, '?', 0),
            (0xACA1, 0xACFE, '?', 0), (0xADA1, 0xADB4, '①', 1), (0xADB5, 0xADBE, 'Ⅰ', 1),
            (0xADBF, 0xADBF, '?', 0), (0xADC0, 0xADC0, '㍉', 0), (0xADC1, 0xADC1, '㌔', 0),
            (0xADC2, 0xADC2, '㌢', 0), (0xADC3, 0xADC3, '㍍', 0), (0xADC4, 0xADC4, '㌘', 0),
            (0xADC5, 0xADC5, '㌧', 0), (0xADC6, 0xADC6, '㌃', 0), (0xADC7, 0xADC7, '㌶', 0),
            (0xADC8, 0xADC8, '㍑', 0), (0xADC9, 0xADC9, '㍗', 0), (0xADCA, 0xADCA, '㌍', 0),
            (0xADCB, 0xADCB, '㌦', 0), (0xADCC, 0xADCC, '㌣', 0), (0xADCD, 0xADCD, '㌫', 0),
            (0xADCE, 0xADCE, '㍊', 0), (0xADCF, 0xADCF, '㌻', 0), (0xADD0, 0xADD2, '㎜', 1),
            (0xADD3, 0xADD4, '㎎', 1), (0xADD5, 0xADD5, '㏄', 0), (0xADD6, 0xADD6, '㎡', 0),
            (0xADD7, 0xADDE, '?', 0), (0xADDF, 0xADDF, '㍻', 0), (0xADE0, 0xADE0, '〝', 0),
            (0xADE1, 0xADE1, '〟', 0), (0xADE2, 0xADE2, '№', 0), (0xADE3, 0xADE3, '㏍', 0),
            (0xADE4, 0xADE4, '℡', 0), (0xADE5, 0xADE9, '㊤', 1), (0xADEA, 0xADEB, '㈱', 1),
            (0xADEC, 0xADEC, '㈹', 0), (0xADED, 0xADED, '㍾', 0), (0xADEE, 0xADEE, '㍽', 0),
            (0xADEF, 0xADEF, '㍼', 0), (0xADF0, 0xADF0, '≒', 0), (0xADF1, 0xADF1, '≡', 0),
            (0xADF2, 0xADF2, '∫', 0), (0xADF3, 0xADF3, '∮', 0), (0xADF4, 0xADF4, '∑', 0),
            (0xADF5, 0xADF5, '√', 0), (0xADF6, 0xADF6, '⊥', 0), (0xADF7, 0xADF7, '∠', 0),
            (0xADF8, 0xADF8, '∟', 0), (0xADF9, 0xADF9, '⊿', 0), (0xADFA, 0xADFA, '∵', 0),
            (0xADFB, 0xADFC, '∩', 1), (0xADFD, 0xADFE, '?', 0), (0xAEA1, 0xAEFE, '?', 0),
            (0xAFA1, 0xAFFE, '?', 0), (0xCFD4, 0xCFFE, '?', 0), (0xF4A7, 0xF4FE, '?', 0),
            (0xF5A1, 0xF5FE, '\ue000', 1), (0xF6A1, 0xF6FE, '\ue05e', 1), (0xF7A1, 0xF7FE, '\ue0bc', 1),
            (0xF8A1, 0xF8FE, '\ue11a', 1), (0xF9A1, 0xF9FE, '\ue178', 1), (0xFAA1, 0xFAFE, '\ue1d6', 1),
            (0xFBA1, 0xFBFE, '\ue234', 1), (0xFCA1, 0xFCFE, '\ue292', 1), (0xFDA1, 0xFDFE, '\ue2f0', 1),
            (0xFEA1, 0xFEFE, '\ue34e', 1), (0x8FA1A1, 0x8FA1FE, '?', 0), (0x8FA2A1, 0x8FA2AE, '?', 0),
            (0x8FA2B7, 0x8FA2B7, '～', 0), (0x8FA2BA, 0x8FA2C1, '?', 0), (0x8FA2C3, 0x8FA2C3, '￤', 0),
            (0x8FA2C5, 0x8FA2EA, '?', 0), (0x8FA2F2, 0x8FA2FE, '?', 0), (0x8FA3A1, 0x8FA3FE, '?', 0),
            (0x8FA4A1, 0x8FA4FE, '?', 0), (0x8FA5A1, 0x8FA5FE, '?', 0), (0x8FA6A1, 0x8FA6E0, '?', 0),
            (0x8FA6E6, 0x8FA6E6, '?', 0), (0x8FA6E8, 0x8FA6E8, '?', 0), (0x8FA6EB, 0x8FA6EB, '?', 0),
            (0x8FA6ED, 0x8FA6F0, '?', 0), (0x8FA6FD, 0x8FA6FE, '?', 0), (0x8FA7A1, 0x8FA7C1, '?', 0),
            (0x8FA7CF, 0x8FA7F1, '?', 0), (0x8FA8A1, 0x8FA8FE, '?', 0), (0x8FA9A3, 0x8FA9A3, '?', 0),
            (0x8FA9A5, 0x8FA9A5, '?', 0), (0x8FA9A7, 0x8FA9A7, '?', 0), (0x8FA9AA, 0x8FA9AA, '?', 0),
            (0x8FA9AE, 0x8FA9AE, '?', 0), (0x8FA9B1, 0x8FA9C0, '?', 0), (0x8FA9D1, 0x8FA9FE, '?', 0),
            (0x8FAAB9, 0x8FAAB9, '?', 0), (0x8FAAF8, 0x8FAAFE, '?', 0), (0x8FABBC, 0x8FABBC, '?', 0),
            (0x8FABC4, 0x8FABC4, '?', 0), (0x8FABF8, 0x8FABFE, '?', 0), (0x8FACA1, 0x8FACFE, '?', 0),
            (0x8FADA1, 0x8FADFE, '?', 0), (0x8FAEA1, 0x8FAEFE, '?', 0), (0x8FAFA1, 0x8FAFFE, '?', 0),
            (0x8FEDE4, 0x8FEDFE, '?', 0), (0x8FEEA1, 0x8FEEFE, '?', 0), (0x8FEFA1, 0x8FEFFE, '?', 0),
            (0x8FF0A1, 0x8FF0FE, '?', 0), (0x8FF1A1, 0x8FF1FE, '?', 0), (0x8FF2A1, 0x8FF2FE, '?', 0),
            (0x8FF3A1, 0x8FF3F2, '?', 0), (0x8FF3F3, 0x8FF3FC, 'ⅰ', 1), (0x8FF3FD, 0x8FF3FE, 'Ⅰ', 1),
            (0x8FF4A1, 0x8FF4A8, 'Ⅲ', 1), (0x8FF4A9, 0x8FF4A9, '＇', 0), (0x8FF4AA, 0x8FF4AA, '＂', 0),
            (0x8FF4AB, 0x8FF4AB, '㈱', 0), (0x8FF4AC, 0x8FF4AC, '№', 0), (0x8FF4AD, 0x8FF4AD, '℡', 0),
            (0x8FF4AE, 0x8FF4AE, '炻', 0), (0x8FF4AF, 0x8FF4AF, '仼', 0), (0x8FF4B0, 0x8FF4B0, '僴', 0),
            (0x8FF4B1, 0x8FF4B1, '凬', 0), (0x8FF4B2, 0x8FF4B2, '匇', 0), (0x8FF4B3, 0x8FF4B3, '匤', 0),
            (0x8FF4B4, 0x8FF4B4, '﨎', 0), (0x8FF4B5, 0x8FF4B5, '咊', 0), (0x8FF4B6, 0x8FF4B6, '坙', 0),
            (0x8FF4B7, 0x8FF4B8, '﨏', 1), (0x8FF4B9, 0x8FF4B9, '增', 0), (0x8FF4BA, 0x8FF4BA, '寬', 0),
            (0x8FF4BB, 0x8FF4BB, '峵', 0), (0x8FF4BC, 0x8FF4BC, '嵓', 0), (0x8FF4BD, 0x8FF4BD, '﨑', 0),
            (0x8FF4BE, 0x8FF4BE, '德', 0), (0x8FF4BF, 0x8FF4BF, '悅', 0), (0x8FF4C0, 0x8FF4C0, '愠', 0),
            (0x8FF4C1, 0x8FF4C1, '敎', 0), (0x8FF4C2, 0x8FF4C2, '昻', 0), (0x8FF4C3, 0x8FF4C3, '晥', 0),
            (0x8FF4C4, 0x8FF4C4, '晴', 0), (0x8FF4C5, 0x8FF4C5, '朗', 0), (0x8FF4C6, 0x8FF4C6, '栁', 0),
            (0x8FF4C7, 0x8FF4C8, '﨓', 1), (0x8FF4C9, 0x8FF4C9, '橫', 0), (0x8FF4CA, 0x8FF4CA, '櫢', 0),
            (0x8FF4CB, 0x8FF4CB, '淸', 0), (0x8FF4CC, 0x8FF4CC, '淲', 0), (0x8FF4CD, 0x8FF4CD, '瀨', 0),
            (0x8FF4CE, 0x8FF4CF, '凞', 1), (0x8FF4D0, 0x8FF4D0, '甁', 0), (0x8FF4D1, 0x8FF4D1, '皂', 0),
            (0x8FF4D2, 0x8FF4D2, '皞', 0), (0x8FF4D3, 0x8FF4D3, '益', 0), (0x8FF4D4, 0x8FF4D4, '礰', 0),
            (0x8FF4D5, 0x8FF4D8, '礼', 1), (0x8FF4D9, 0x8FF4D9, '竧', 0), (0x8FF4DA, 0x8FF4DB, '靖', 1),
            (0x8FF4DC, 0x8FF4DC, '綠', 0), (0x8FF4DD, 0x8FF4DD, '緖', 0), (0x8FF4DE, 0x8FF4DE, '羽', 0),
            (0x8FF4DF, 0x8FF4DF, '荢', 0), (0x8FF4E0, 0x8FF4E0, '﨟', 0), (0x8FF4E1, 0x8FF4E1, '薰', 0),
            (0x8FF4E2, 0x8FF4E3, '蘒', 1), (0x8FF4E4, 0x8FF4E4, '蠇', 0), (0x8FF4E5, 0x8FF4E5, '諸', 0),
            (0x8FF4E6, 0x8FF4E6, '譿', 0), (0x8FF4E7, 0x8FF4E7, '賴', 0), (0x8FF4E8, 0x8FF4E8, '赶', 0),
            (0x8FF4E9, 0x8FF4EB, '﨣', 1), (0x8FF4EC, 0x8FF4EC, '郞', 0), (0x8FF4ED, 0x8FF4ED, '都', 0),
            (0x8FF4EE, 0x8FF4EE, '鄕', 0), (0x8FF4EF, 0x8FF4F0, '﨧', 1), (0x8FF4F1, 0x8FF4F1, '閒', 0),
            (0x8FF4F2, 0x8FF4F2, '隆', 0), (0x8FF4F3, 0x8FF4F3, '﨩', 0), (0x8FF4F4, 0x8FF4F4, '霻', 0),
            (0x8FF4F5, 0x8FF4F5, '靍', 0), (0x8FF4F6, 0x8FF4F6, '靑', 0), (0x8FF4F7, 0x8FF4F9, '飯', 1),
            (0x8FF4FA, 0x8FF4FA, '馞', 0), (0x8FF4FB, 0x8FF4FB, '髙', 0), (0x8FF4FC, 0x8FF4FC, '魲', 0),
            (0x8FF4FD, 0x8FF4FD, '鶴', 0), (0x8FF4FE, 0x8FF4FE, '黑', 0), (0x8FF5A1, 0x8FF5FE, '\ue3ac', 1),
            (0x8FF6A1, 0x8FF6FE, '\ue40a', 1), (0x8FF7A1, 0x8FF7FE, '\ue468', 1),
            (0x8FF8A1, 0x8FF8FE, '\ue4c6', 1), (0x8FF9A1, 0x8FF9FE, '\ue524', 1),
            (0x8FFAA1, 0x8FFAFE, '\ue582', 1), (0x8FFBA1, 0x8FFBFE, '\ue5e0', 1),
            (0x8FFCA1, 0x8FFCFE, '\ue63e', 1), (0x8FFDA1, 0x8FFDFE, '\ue69c', 1),
            (0x8FFEA1, 0x8FFEFE, '\ue6fa', 1),
        ),
    ),
    'euckr': (
        'cp949',
        (bytes([*range(0x81, 0xFF)]), bytes([])),
        (
            (0xA2E8, 0xA2FE, '?', 0), (0xA5AB, 0xA5AF, '?', 0), (0xA5BA, 0xA5C0, '?', 0),
            (0xA5D9, 0xA5E0, '?', 0), (0xA5F9, 0xA5FE, '?', 0), (0xA6E5, 0xA6FE, '?', 0),
            (0xA7F0, 0xA7FE, '?', 0), (0xA8A5, 0xA8A5, '?', 0), (0xA8A7, 0xA8A7, '?', 0),
            (0xA8B0, 0xA8B0, '?', 0), (0xAAF4, 0xAAFE, '?', 0), (0xABF7, 0xABFE, '?', 0),
            (0xACC2, 0xACD0, '?', 0), (0xACF2, 0xACFE, '?', 0), (0xADA1, 0xADFE, '?', 0),
            (0xAEA1, 0xAEFE, '?', 0), (0xAFA1, 0xAFFE, '?', 0), (0xC653, 0xC65A, '?', 0),
            (0xC661, 0xC67A, '?', 0), (0xC681, 0xC6A0, '?', 0), (0xC741, 0xC75A, '?', 0),
            (0xC761, 0xC77A, '?', 0), (0xC781, 0xC7A0, '?', 0), (0xC841, 0xC85A, '?', 0),
            (0xC861, 0xC87A, '?', 0), (0xC881, 0xC8A0, '?', 0), (0xC941, 0xC95A, '?', 0),
            (0xC961, 0xC97A, '?', 0), (0xC981, 0xC9FE, '?', 0), (0xCA41, 0xCA5A, '?', 0),
            (0xCA61, 0xCA7A, '?', 0), (0xCA81, 0xCAA0, '?', 0), (0xCB41, 0xCB5A, '?', 0),
            (0xCB61, 0xCB7A, '?', 0), (0xCB81, 0xCBA0, '?', 0), (0xCC41, 0xCC5A, '?', 0),
            (0xCC61, 0xCC7A, '?', 0), (0xCC81, 0xCCA0, '?', 0), (0xCD41, 0xCD5A, '?', 0),
            (0xCD61, 0xCD7A, '?', 0), (0xCD81, 0xCDA0, '?', 0), (0xCE41, 0xCE5A, '?', 0),
            (0xCE61, 0xCE7A, '?', 0), (0xCE81, 0xCEA0, '?', 0), (0xCF41, 0xCF5A, '?', 0),
            (0xCF61, 0xCF7A, '?', 0), (0xCF81, 0xCFA0, '?', 0), (0xD041, 0xD05A, '?', 0),
            (0xD061, 0xD07A, '?', 0), (0xD081, 0xD0A0, '?', 0), (0xD141, 0xD15A, '?', 0),
            (0xD161, 0xD17A, '?', 0), (0xD181, 0xD1A0, '?', 0), (0xD241, 0xD25A, '?', 0),
            (0xD261, 0xD27A, '?', 0), (0xD281, 0xD2A0, '?', 0), (0xD341, 0xD35A, '?', 0),
            (0xD361, 0xD37A, '?', 0), (0xD381, 0xD3A0, '?', 0), (0xD441, 0xD45A, '?', 0),
            (0xD461, 0xD47A, '?', 0), (0xD481, 0xD4A0, '?', 0), (0xD541, 0xD55A, '?', 0),
            (0xD561, 0xD57A, '?', 0), (0xD581, 0xD5A0, '?', 0), (0xD641, 0xD65A, '?', 0),
            (0xD661, 0xD67A, '?', 0), (0xD681, 0xD6A0, '?', 0), (0xD741, 0xD75A, '?', 0),
            (0xD761, 0xD77A, '?', 0), (0xD781, 0xD7A0, '?', 0), (0xD841, 0xD85A, '?', 0),
            (0xD861, 0xD87A, '?', 0), (0xD881, 0xD8A0, '?', 0), (0xD941, 0xD95A, '?', 0),
            (0xD961, 0xD97A, '?', 0), (0xD981, 0xD9A0, '?', 0), (0xDA41, 0xDA5A, '?', 0),
            (0xDA61, 0xDA7A, '?', 0), (0xDA81, 0xDAA0, '?', 0), (0xDB41, 0xDB5A, '?', 0),
            (0xDB61, 0xDB7A, '?', 0), (0xDB81, 0xDBA0, '?', 0), (0xDC41, 0xDC5A, '?', 0),
            (0xDC61, 0xDC7A, '?', 0), (0xDC81, 0xDCA0, '?', 0), (0xDD41, 0xDD5A, '?', 0),
            (0xDD61, 0xDD7A, '?', 0), (0xDD81, 0xDDA0, '?', 0), (0xDE41, 0xDE5A, '?', 0),
            (0xDE61, 0xDE7A, '?', 0), (0xDE81, 0xDEA0, '?', 0), (0xDF41, 0xDF5A, '?', 0),
            (0xDF61, 0xDF7A, '?', 0), (0xDF81, 0xDFA0, '?', 0), (0xE041, 0xE05A, '?', 0),
            (0xE061, 0xE07A, '?', 0), (0xE081, 0xE0A0, '?', 0), (0xE141, 0xE15A, '?', 0),
            (0xE161, 0xE17A, '?', 0), (0xE181, 0xE1A0, '?', 0), (0xE241, 0xE25A, '?', 0),
            (0xE261, 0xE27A, '?', 0), (0xE281, 0xE2A0, '?', 0), (0xE341, 0xE35A, '?', 0),
            (0xE361, 0xE37A, '?', 0), (0xE381, 0xE3A0, '?', 0), (0xE441, 0xE45A, '?', 0),
            (0xE461, 0xE47A, '?', 0), (0xE481, 0xE4A0, '?', 0), (0xE541, 0xE55A, '?', 0),
            (0xE561, 0xE57A, '?', 0), (0xE581, 0xE5A0, '?', 0), (0xE641, 0xE65A, '?', 0),
            (0xE661, 0xE67A, '?', 0), (0xE681, 0xE6A0, '?', 0), (0xE741, 0xE75A, '?', 0),
            (0xE761, 0xE77A, '?', 0), (0xE781, 0xE7A0, '?', 0), (0xE841, 0xE85A, '?', 0),
            (0xE861, 0xE87A, '?', 0), (0xE881, 0xE8A0, '?', 0), (0xE941, 0xE95A, '?', 0),
            (0xE961, 0xE97A, '?', 0), (0xE981, 0xE9A0, '?', 0), (0xEA41, 0xEA5A, '?', 0),
            (0xEA61, 0xEA7A, '?', 0), (0xEA81, 0xEAA0, '?', 0), (0xEB41, 0xEB5A, '?', 0),
            (0xEB61, 0xEB7A, '?', 0), (0xEB81, 0xEBA0, '?', 0), (0xEC41, 0xEC5A, '?', 0),
            (0xEC61, 0xEC7A, '?', 0), (0xEC81, 0xECA0, '?', 0), (0xED41, 0xED5A, '?', 0),
            (0xED61, 0xED7A, '?', 0), (0xED81, 0xEDA0, '?', 0), (0xEE41, 0xEE5A, '?', 0),
            (0xEE61, 0xEE7A, '?', 0), (0xEE81, 0xEEA0, '?', 0), (0xEF41, 0xEF5A, '?', 0),
            (0xEF61, 0xEF7A, '?', 0), (0xEF81, 0xEFA0, '?', 0), (0xF041, 0xF05A, '?', 0),
            (0xF061, 0xF07A, '?', 0), (0xF081, 0xF0A0, '?', 0), (0xF141, 0xF15A, '?', 0),
            (0xF161, 0xF17A, '?', 0), (0xF181, 0xF1A0, '?', 0), (0xF241, 0xF25A, '?', 0),
            (0xF261, 0xF27A, '?', 0), (0xF281, 0xF2A0, '?', 0), (0xF341, 0xF35A, '?', 0),
            (0xF361, 0xF37A, '?', 0), (0xF381, 0xF3A0, '?', 0), (0xF441, 0xF45A, '?', 0),
            (0xF461, 0xF47A, '?', 0), (0xF481, 0xF4A0, '?', 0), (0xF541, 0xF55A, '?', 0),
            (0xF561, 0xF57A, '?', 0), (0xF581, 0xF5A0, '?', 0), (0xF641, 0xF65A, '?', 0),
            (0xF661, 0xF67A, '?', 0), (0xF681, 0xF6A0, '?', 0), (0xF741, 0xF75A, '?', 0),
            (0xF761, 0xF77A, '?', 0), (0xF781, 0xF7A0, '?', 0), (0xF841, 0xF85A, '?', 0),
            (0xF861, 0xF87A, '?', 0), (0xF881, 0xF8A0, '?', 0), (0xF941, 0xF95A, '?', 0),
            (0xF961, 0xF97A, '?', 0), (0xF981, 0xF9A0, '?', 0), (0xFA41, 0xFA5A, '?', 0),
            (0xFA61, 0xFA7A, '?', 0), (0xFA81, 0xFAA0, '?', 0), (0xFB41, 0xFB5A, '?', 0),
            (0xFB61, 0xFB7A, '?', 0), (0xFB81, 0xFBA0, '?', 0), (0xFC41, 0xFC5A, '?', 0),
            (0xFC61, 0xFC7A, '?', 0), (0xFC81, 0xFCA0, '?', 0), (0xFD41, 0xFD5A, '?', 0),
            (0xFD61, 0xFD7A, '?', 0), (0xFD81, 0xFDA0, '?', 0), (0xFE41, 0xFE5A, '?', 0),
            (0xFE61, 0xFE7A, '?', 0), (0xFE81, 0xFEFE, '?', 0),
        ),
    ),
    'gb2312': (
        'gb2312',
        (bytes([*range(0xA1, 0xF8)]), bytes([])),
        (
            (0xA2A1, 0xA2B0, '?', 0), (0xA2E3, 0xA2E4, '?', 0), (0xA2EF, 0xA2F0, '?', 0),
            (0xA2FD, 0xA2FE, '?', 0), (0xA4F4, 0xA4FE, '?', 0), (0xA5F7, 0xA5FE, '?', 0),
            (0xA6B9, 0xA6C0, '?', 0), (0xA6D9, 0xA6FE, '?', 0), (0xA7C2, 0xA7D0, '?', 0),
            (0xA7F2, 0xA7FE, '?', 0), (0xA8BB, 0xA8C4, '?', 0), (0xA8EA, 0xA8FE, '?', 0),
            (0xA9A1, 0xA9A3, '?', 0), (0xA9F0, 0xA9FE, '?', 0), (0xAAA1, 0xAAFE, '?', 0),
            (0xABA1, 0xABFE, '?', 0), (0xACA1, 0xACFE, '?', 0), (0xADA1, 0xADFE, '?', 0),
            (0xAEA1, 0xAEFE, '?', 0), (0xAFA1, 0xAFFE, '?', 0), (0xD7FA, 0xD7FE, '?', 0),
        ),
    ),
    'gbk': (
        'gbk',
        (bytes([*range(0x81, 0xFF)]), bytes([])),
        (
            (0xA140, 0xA17E, '?', 0), (0xA180, 0xA1A0, '?', 0), (0xA240, 0xA27E, '?', 0),
            (0xA280, 0xA2A0, '?', 0), (0xA2AB, 0xA2B0, '?', 0), (0xA2E3, 0xA2E4, '?', 0),
            (0xA2EF, 0xA2F0, '?', 0), (0xA2FD, 0xA2FE, '?', 0), (0xA340, 0xA37E, '?', 0),
            (0xA380, 0xA3A0, '?', 0), (0xA440, 0xA47E, '?', 0), (0xA480, 0xA4A0, '?', 0),
            (0xA4F4, 0xA4FE, '?', 0), (0xA540, 0xA57E, '?', 0), (0xA580, 0xA5A0, '?', 0),
            (0xA5F7, 0xA5FE, '?', 0), (0xA640, 0xA67E, '?', 0), (0xA680, 0xA6A0, '?', 0),
            (0xA6B9, 0xA6C0, '?', 0), (0xA6D9, 0xA6DF, '?', 0), (0xA6EC, 0xA6ED, '?', 0),
            (0xA6F3, 0xA6F3, '?', 0), (0xA6F6, 0xA6FE, '?', 0), (0xA740, 0xA77E, '?', 0),
            (0xA780, 0xA7A0, '?', 0), (0xA7C2, 0xA7D0, '?', 0), (0xA7F2, 0xA7FE, '?', 0),
            (0xA896, 0xA8A0, '?', 0), (0xA8BC, 0xA8BC, '?', 0), (0xA8BF, 0xA8BF, '?', 0),
            (0xA8C1, 0xA8C4, '?', 0), (0xA8EA, 0xA8FE, '?', 0), (0xA958, 0xA958, '?', 0),
            (0xA95B, 0xA95B, '?', 0), (0xA95D, 0xA95F, '?', 0), (0xA989, 0xA995, '?', 0),
            (0xA997, 0xA9A3, '?', 0), (0xA9F0, 0xA9FE, '?', 0), (0xAAA1, 0xAAFE, '?', 0),
            (0xABA1, 0xABFE, '?', 0), (0xACA1, 0xACFE, '?', 0), (0xADA1, 0xADFE, '?', 0),
            (0xAEA1, 0xAEFE, '?', 0), (0xAFA1, 0xAFFE, '?', 0), (0xD7FA, 0xD7FE, '?', 0),
            (0xF8A1, 0xF8FE, '?', 0), (0xF9A1, 0xF9FE, '?', 0), (0xFAA1, 0xFAFE, '?', 0),
            (0xFBA1, 0xFBFE, '?', 0), (0xFCA1, 0xFCFE, '?', 0), (0xFDA1, 0xFDFE, '?', 0),
            (0xFE50, 0xFE7E, '?', 0), (0xFE80, 0xFEFE, '?', 0),
        ),
    ),
    'sjis': (
        'shift_jis',
        (bytes([*range(0x81, 0xA0), *range(0xE0, 0xFD)]), bytes([])),
        (
            (0x815F, 0x815F, '\\', 0), (0x81AD, 0x81B7, '?', 0), (0x81C0, 0x81C7, '?', 0),
            (0x81CF, 0x81D9, '?', 0), (0x81E9, 0x81EF, '?', 0), (0x81F8, 0x81FB, '?', 0),
            (0x8240, 0x824E, '?', 0), (0x8259, 0x825F, '?', 0), (0x827A, 0x827E, '?', 0),
            (0x8280, 0x8280, '?', 0), (0x829B, 0x829E, '?', 0), (0x82F2, 0x82FC, '?', 0),
            (0x8397, 0x839E, '?', 0), (0x83B7, 0x83BE, '?', 0), (0x83D7, 0x83FC, '?', 0),
            (0x8461, 0x846F, '?', 0), (0x8492, 0x849E, '?', 0), (0x84BF, 0x84FC, '?', 0),
            (0x8540, 0x857E, '?', 0), (0x8580, 0x85FC, '?', 0), (0x8640, 0x867E, '?', 0),
            (0x8680, 0x86FC, '?', 0), (0x8740, 0x877E, '?', 0), (0x8780, 0x87FC, '?', 0),
            (0x8840, 0x887E, '?', 0), (0x8880, 0x889E, '?', 0), (0x9873, 0x987E, '?', 0),
            (0x9880, 0x989E, '?', 0), (0xEAA5, 0xEAFC, '?', 0), (0xEB40, 0xEB7E, '?', 0),
            (0xEB80, 0xEBFC, '?', 0), (0xEC40, 0xEC7E, '?', 0), (0xEC80, 0xECFC, '?', 0),
            (0xED40, 0xED7E, '?', 0), (0xED80, 0xEDFC, '?', 0), (0xEE40, 0xEE7E, '?', 0),
            (0xEE80, 0xEEFC, '?', 0), (0xEF40, 0xEF7E, '?', 0), (0xEF80, 0xEFFC, '?', 0),
            (0xF040, 0xF07E, '?', 0), (0xF080, 0xF0FC, '?', 0), (0xF140, 0xF17E, '?', 0),
            (0xF180, 0xF1FC, '?', 0), (0xF240, 0xF27E, '?', 0), (0xF280, 0xF2FC, '?', 0),
            (0xF340, 0xF37E, '?', 0), (0xF380, 0xF3FC, '?', 0), (0xF440, 0xF47E, '?', 0),
            (0xF480, 0xF4FC, '?', 0), (0xF540, 0xF57E, '?', 0), (0xF580, 0xF5FC, '?', 0),
            (0xF640, 0xF67E, '?', 0), (0xF680, 0xF6FC, '?', 0), (0xF740, 0xF77E, '?', 0),
            (0xF780, 0xF7FC, '?', 0), (0xF840, 0xF87E, '?', 0), (0xF880, 0xF8FC, '?', 0),
            (0xF940, 0xF97E, '?', 0), (0xF980, 0xF9FC, '?', 0), (0xFA40, 0xFA7E, '?', 0),
            (0xFA80, 0xFAFC, '?', 0), (0xFB40, 0xFB7E, '?', 0), (0xFB80, 0xFBFC, '?', 0),
            (0xFC40, 0xFC7E, '?', 0), (0xFC80, 0xFCFC, '?', 0),
        ),
    ),
    'ujis': (
        'euc_jp',
        (bytes([*range(0x8E, 0x8F), *range(0xA1, 0xFF)]), bytes([*range(0x8F, 0x90)])),
        (
            (0xA1C0, 0xA1C0, '\\', 0), (0xA2AF, 0xA2B9, '?', 0), (0xA2C2, 0xA2C9, '?', 0),
            (0xA2D1, 0xA2DB, '?', 0), (0xA2EB, 0xA2F1, '?', 0), (0xA2FA, 0xA2FD, '?', 0),
            (0xA3A1, 0xA3AF, '?', 0), (0xA3BA, 0xA3C0, '?', 0), (0xA3DB, 0xA3E0, '?', 0),
            (0xA3FB, 0xA3FE, '?', 0), (0xA4F4, 0xA4FE, '?', 0), (0xA5F7, 0xA5FE, '?', 0),
            (0xA6B9, 0xA6C0, '?', 0), (0xA6D9, 0xA6FE, '?', 0), (0xA7C2, 0xA7D0, '?', 0),
            (0xA7F2, 0xA7FE, '?', 0), (0xA8C1, 0xA8FE, '?', 0), (0xA9A1, 0xA9FE, '?', 0),
            (0xAAA1, 0xAAFE, '?', 0), (0xABA1, 0xABFE, '?', 0), (0xACA1, 0xACFE, '?', 0),
            (0xADA1, 0xADFE, '?', 0), (0xAEA1, 0xAEFE, '?', 0), (0xAFA1, 0xAFFE, '?', 0),
            (0xCFD4, 0xCFFE, '?', 0), (0xF4A7, 0xF4FE, '?', 0), (0xF5A1, 0xF5FE, '\ue000', 1),
            (0xF6A1, 0xF6FE, '\ue05e', 1), (0xF7A1, 0xF7FE, '\ue0bc', 1), (0xF8A1, 0xF8FE, '\ue11a', 1),
            (0xF9A1, 0xF9FE, '\ue178', 1), (0xFAA1, 0xFAFE, '\ue1d6', 1), (0xFBA1, 0xFBFE, '\ue234', 1),
            (0xFCA1, 0xFCFE, '\ue292', 1), (0xFDA1, 0xFDFE, '\ue2f0', 1), (0xFEA1, 0xFEFE, '\ue34e', 1),
            (0x8FA1A1, 0x8FA1FE, '?', 0), (0x8FA2A1, 0x8FA2AE, '?', 0), (0x8FA2BA, 0x8FA2C1, '?', 0),
            (0x8FA2C5, 0x8FA2EA, '?', 0), (0x8FA2F2, 0x8FA2FE, '?', 0), (0x8FA3A1, 0x8FA3FE, '?', 0),
            (0x8FA4A1, 0x8FA4FE, '?', 0), (0x8FA5A1, 0x8FA5FE, '?', 0), (0x8FA6A1, 0x8FA6E0, '?', 0),
            (0x8FA6E6, 0x8FA6E6, '?', 0), (0x8FA6E8, 0x8FA6E8, '?', 0), (0x8FA6EB, 0x8FA6EB, '?', 0),
            (0x8FA6ED, 0x8FA6F0, '?', 0), (0x8FA6FD, 0x8FA6FE, '?', 0), (0x8FA7A1, 0x8FA7C1, '?', 0),
            (0x8FA7CF, 0x8FA7F1, '?', 0), (0x8FA8A1, 0x8FA8FE, '?', 0), (0x8FA9A3, 0x8FA9A3, '?', 0),
            (0x8FA9A5, 0x8FA9A5, '?', 0), (0x8FA9A7, 0x8FA9A7, '?', 0), (0x8FA9AA, 0x8FA9AA, '?', 0),
            (0x8FA9AE, 0x8FA9AE, '?', 0), (0x8FA9B1, 0x8FA9C0, '?', 0), (0x8FA9D1, 0x8FA9FE, '?', 0),
            (0x8FAAB9, 0x8FAAB9, '?', 0), (0x8FAAF8, 0x8FAAFE, '?', 0), (0x8FABBC, 0x8FABBC, '?', 0),
            (0x8FABC4, 0x8FABC4, '?', 0), (0x8FABF8, 0x8FABFE, '?', 0), (0x8FACA1, 0x8FACFE, '?', 0),
            (0x8FADA1, 0x8FADFE, '?', 0), (0x8FAEA1, 0x8FAEFE, '?', 0), (0x8FAFA1, 0x8FAFFE, '?', 0),
            (0x8FEDE4, 0x8FEDFE, '?', 0), (0x8FEEA1, 0x8FEEFE, '?', 0), (0x8FEFA1, 0x8FEFFE, '?', 0),
            (0x8FF0A1, 0x8FF0FE, '?', 0), (0x8FF1A1, 0x8FF1FE, '?', 0), (0x8FF2A1, 0x8FF2FE, '?', 0),
            (0x8FF3A1, 0x8FF3FE, '?', 0), (0x8FF4A1, 0x8FF4FE, '?', 0), (0x8FF5A1, 0x8FF5FE, '\ue3ac', 1),
            (0x8FF6A1, 0x8FF6FE, '\ue40a', 1), (0x8FF7A1, 0x8FF7FE, '\ue468', 1),
            (0x8FF8A1, 0x8FF8FE, '\ue4c6', 1), (0x8FF9A1, 0x8FF9FE, '\ue524', 1),
            (0x8FFAA1, 0x8FFAFE, '\ue582', 1), (0x8FFBA1, 0x8FFBFE, '\ue5e0', 1),
            (0x8FFCA1, 0x8FFCFE, '\ue63e', 1), (0x8FFDA1, 0x8FFDFE, '\ue69c', 1),
            (0x8FFEA1, 0x8FFEFE, '\ue6fa', 1),
        ),
    ),
}
UNPROVEN: dict[str, str] = {
}
